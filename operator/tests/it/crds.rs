//! `deploy/` holds exactly what `operator crd` prints (run as the real
//! binary), in both forms: `deploy/crds/` with the CEL rule, and
//! `deploy/crds-without-cel/` (rendered by kustomize) without it; and the
//! operator's kustomization holds no CRD, so deleting it deletes none.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

fn operator(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_operator"))
        .args(args)
        .output()
        .expect("the operator binary runs");
    assert!(
        out.status.success(),
        "operator {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn deploy(path: &str) -> String {
    format!("{}/../deploy/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// The YAML documents of a stream, as JSON values (numbers as floats:
/// `minimum: 1` and `minimum: 1.0` mean the same to the API server).
fn docs(yaml: &str) -> Vec<serde_json::Value> {
    yaml.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter_map(|d| {
            let mut v: serde_json::Value = serde_saphyr::from_str(d).ok()?;
            floats(&mut v);
            (!v.is_null()).then_some(v)
        })
        .collect()
}

fn floats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Number(n) => {
            if let Some(f) = n.as_f64().and_then(serde_json::Number::from_f64) {
                *n = f;
            }
        }
        serde_json::Value::Object(m) => m.values_mut().for_each(floats),
        serde_json::Value::Array(a) => a.iter_mut().for_each(floats),
        _ => {}
    }
}

#[test]
fn deploy_crds_equal_operator_crd() {
    let printed = operator(&["crd"]);
    let stored = std::fs::read_to_string(deploy("crds/egress-proxies.io.yaml")).unwrap();
    assert!(
        printed == stored,
        "deploy/crds/egress-proxies.io.yaml is stale: regenerate it with \
         `cargo run -p operator -- crd > deploy/crds/egress-proxies.io.yaml`"
    );
    let crds = docs(&stored);
    let kinds: Vec<&str> = crds
        .iter()
        .filter_map(|c| c["spec"]["names"]["kind"].as_str())
        .collect();
    assert_eq!(kinds, ["Proxy", "ProviderHealth", "ProxyPool"]);
    let spec = &crds[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        spec["x-kubernetes-validations"][0]["rule"], "self == oldSelf",
        "the default CRDs carry the immutability rule"
    );
}

#[test]
fn the_overlay_without_cel_renders_what_operator_crd_without_cel_prints() {
    let printed = docs(&operator(&["crd", "--without-cel"]));
    let out = Command::new("kubectl")
        .args(["kustomize", &deploy("crds-without-cel")])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = docs(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(rendered.len(), printed.len());
    for crd in &printed {
        let name = &crd["metadata"]["name"];
        let got = rendered
            .iter()
            .find(|d| d["kind"] == "CustomResourceDefinition" && &d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("deploy/crds-without-cel renders no CRD {name}"));
        assert_eq!(
            got, crd,
            "deploy/crds-without-cel's {name} differs from `operator crd --without-cel`"
        );
        assert!(!got.to_string().contains("x-kubernetes-validations"));
    }
}

#[test]
fn deleting_the_operators_kustomization_deletes_no_crd_and_no_namespace() {
    let out = Command::new("kubectl")
        .args(["kustomize", &deploy("")])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kinds: Vec<String> = docs(&String::from_utf8(out.stdout).unwrap())
        .iter()
        .map(|d| d["kind"].as_str().unwrap_or("").to_owned())
        .collect();
    for never in ["CustomResourceDefinition", "Namespace", "Proxy", "Secret"] {
        assert!(
            !kinds.iter().any(|k| k == never),
            "`kubectl delete -k deploy/` would delete a {never}: {kinds:?}"
        );
    }
    assert!(kinds.iter().any(|k| k == "Deployment"), "{kinds:?}");
}

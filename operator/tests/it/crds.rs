//! `deploy/` holds exactly what `operator crd` prints (run as the real
//! binary), in both forms: `deploy/crds/` without CEL rules, and
//! `deploy/cel/` (rendered by kustomize) with them.

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
fn deploy_crds_equal_operator_crd_without_cel() {
    let printed = operator(&["crd", "--without-cel"]);
    let stored = std::fs::read_to_string(deploy("crds/egress-proxies.io.yaml")).unwrap();
    assert!(
        printed == stored,
        "deploy/crds/egress-proxies.io.yaml is stale: regenerate it with \
         `cargo run -p operator -- crd --without-cel > deploy/crds/egress-proxies.io.yaml`"
    );
    assert!(!stored.contains("x-kubernetes-validations"));
    assert_eq!(docs(&stored).len(), 2);
}

#[test]
fn the_cel_overlay_renders_what_operator_crd_prints() {
    let printed = docs(&operator(&["crd"]));
    let out = Command::new("kubectl")
        .args(["kustomize", &deploy("cel")])
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rendered = docs(&String::from_utf8(out.stdout).unwrap());
    for crd in &printed {
        let name = &crd["metadata"]["name"];
        let got = rendered
            .iter()
            .find(|d| d["kind"] == "CustomResourceDefinition" && &d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("deploy/cel renders no CRD {name}"));
        assert_eq!(got, crd, "deploy/cel's {name} differs from `operator crd`");
    }
    let spec =
        &printed[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        spec["x-kubernetes-validations"][0]["rule"],
        "self == oldSelf"
    );
}

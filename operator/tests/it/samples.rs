//! deploy/'s samples as a new user meets them: `operator validate` refuses
//! the sample providers config while it holds the sample's placeholders and
//! says what to put instead; with them replaced it passes; the sample Proxy
//! names only what that config defines, and its Secret is in the same file.

use std::process::Command;

fn deploy(path: &str) -> String {
    format!("{}/../deploy/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// `operator validate --config PATH`: (success, stdout).
fn validate(path: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_operator"))
        .args(["validate", "--config"])
        .arg(path)
        .output()
        .expect("the operator binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn validate_refuses_the_samples_placeholders_with_what_to_do() {
    let (ok, out) = validate(std::path::Path::new(&deploy("providers-config.yaml")));
    assert!(!ok, "{out}");
    for expected in [
        "providers[0].kvm2.hosts[0].address: 192.0.2.11 is a placeholder",
        "providers[0].kvm2.hosts[1].address: kvm2.lan.example is a placeholder",
        "providers[0].kvm2.images.proxy-guest.sha256: is a placeholder (all zeros): put the sha256 that `cargo xtask guest-image` printed",
        "providers[0].kvm2.images.proxy-guest.url: https://images.invalid/egress-proxies/proxy-guest.qcow2 is a placeholder",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }

    // The required edits done: it validates.
    let sample = std::fs::read_to_string(deploy("providers-config.yaml")).unwrap();
    let edited = sample
        .replace("address: 192.0.2.11", "address: 10.20.0.11")
        .replace("address: kvm2.lan.example", "address: kvm2.lan")
        .replace(
            "https://images.invalid/egress-proxies/proxy-guest.qcow2",
            "https://images.lan/proxy-guest.qcow2",
        )
        .replace(
            "0000000000000000000000000000000000000000000000000000000000000000",
            "6f6e6d3b90810000000000000000000000000000000000000000000000000001",
        );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.yaml");
    std::fs::write(&path, edited).unwrap();
    let (ok, out) = validate(&path);
    assert!(ok, "{out}");
}

#[test]
fn the_sample_proxy_names_only_what_the_sample_config_defines() {
    let config =
        provider_api::ProvidersConfig::load(std::path::Path::new(&deploy("providers-config.yaml")))
            .unwrap();
    let text = std::fs::read_to_string(deploy("samples/proxy.yaml")).unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("\n---")
        .filter_map(|d| serde_saphyr::from_str(d.trim_start_matches("---")).ok())
        .collect();
    let proxy = docs.iter().find(|d| d["kind"] == "Proxy").expect("a Proxy");
    let spec = &proxy["spec"];
    let entry = config
        .providers
        .iter()
        .find(|e| e.name.as_str() == spec["provider"])
        .expect("the sample Proxy's provider is an entry of the sample config");
    let k = entry.kvm2().unwrap();
    assert!(
        k.images.keys().any(|key| key.as_str() == spec["image"]),
        "image {} is not a key of the sample config",
        spec["image"]
    );
    assert!(
        k.machine_types
            .keys()
            .any(|m| m.as_str() == spec["machineType"]),
        "machineType {}",
        spec["machineType"]
    );
    assert!(
        k.hosts
            .iter()
            .any(|h| h.name.as_str() == spec["placement"]["host"]),
        "host {}",
        spec["placement"]["host"]
    );
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == spec["cloudInit"]["name"])
        .expect("the Secret the sample Proxy names is in the sample");
    let key = spec["cloudInit"]["key"].as_str().unwrap();
    assert!(
        secret["stringData"][key]
            .as_str()
            .is_some_and(|v| v.starts_with("#cloud-config")),
        "{secret}"
    );
}

#[test]
fn the_sample_pool_validates_and_names_what_the_sample_config_defines() {
    let config =
        provider_api::ProvidersConfig::load(std::path::Path::new(&deploy("providers-config.yaml")))
            .unwrap();
    let text = std::fs::read_to_string(deploy("samples/proxy-pool.yaml")).unwrap();
    let pool: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(pool["kind"], "ProxyPool");
    let spec: fleet::pool::ProxyPoolSpec = serde_json::from_value(pool["spec"].clone()).unwrap();
    let name = pool["metadata"]["name"].as_str().unwrap();
    let valid = spec.validate(name).unwrap();
    let template = &valid.spec.template.spec;
    let entry = config
        .providers
        .iter()
        .find(|e| e.name.as_str() == template.provider)
        .expect("the sample pool's provider is an entry of the sample config");
    let k = entry.kvm2().unwrap();
    assert!(
        k.images
            .keys()
            .any(|key| Some(key.as_str()) == template.image.as_deref())
    );
    assert!(
        k.machine_types
            .keys()
            .any(|m| Some(m.as_str()) == template.machine_type.as_deref())
    );
    assert!(template.placement.host.is_none(), "the sample shows spread");
}

#[test]
fn the_sample_existing_proxy_is_an_existing_proxy_and_nothing_else() {
    let text = std::fs::read_to_string(deploy("samples/existing-proxy.yaml")).unwrap();
    let proxy: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(proxy["kind"], "Proxy");
    let spec: fleet::ProxySpec = serde_json::from_value(proxy["spec"].clone()).unwrap();
    let addr = spec.existing_address().unwrap().expect("spec.existing");
    assert_eq!(addr.port(), 3128);
}

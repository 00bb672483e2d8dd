#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The sample providers config in `deploy/` loads, builds a kvm2 provider
//! through the registry, and its image entry — a placeholder until the
//! guest image (`cargo xtask guest-image`) is published somewhere — is
//! refused by Create with a message saying what to do, before any host is
//! dialled or anything downloaded.

use provider_api::{
    CreateRequest, ErrorClass, Identifier, ObjectName, OwnerUid, ProvidersConfig, Registry,
};

#[tokio::test]
async fn the_sample_configs_placeholder_image_is_refused_with_what_to_do() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml");
    let config = ProvidersConfig::load(&path).unwrap();
    let mut registry = Registry::new();
    kvm2_provider::register(&mut registry).unwrap();
    let providers = registry.build(&config).unwrap();
    let entry = &config.providers[0];
    let provider = providers.get(&entry.name).unwrap();
    let req = CreateRequest::new(
        OwnerUid::parse("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab").unwrap(),
        ObjectName::parse("proxy-a").unwrap(),
        Identifier::parse("default").unwrap(),
    );
    // The sample's hosts (192.168.10.11, kvm2.lan.example) are never
    // dialled: the refusal comes first, so this returns at once.
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), provider.create(&req))
        .await
        .expect("refused before any dial")
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    let text = err.to_string();
    assert!(text.contains("placeholder"), "{text}");
    assert!(text.contains("cargo xtask guest-image"), "{text}");
}

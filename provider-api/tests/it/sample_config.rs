//! The sample providers config shipped in `deploy/` is accepted as is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use provider_api::{ProviderType, ProvidersConfig};

#[test]
fn deploy_sample_config_is_valid() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml");
    let cfg = match ProvidersConfig::load(&path) {
        Ok(c) => c,
        Err(e) => panic!("{}: {e}", path.display()),
    };
    assert!(!cfg.providers.is_empty());
    for p in &cfg.providers {
        assert_eq!(p.provider_type(), ProviderType::Kvm2);
        let k = p.kvm2().expect("kvm2 block");
        assert!(!k.hosts.is_empty());
        assert!(k.defaults.image.is_some() && k.defaults.machine_type.is_some());
    }
}

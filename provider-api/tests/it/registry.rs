//! The registry builds providers from the config through constructors that
//! implementation crates register from outside this crate.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;

use crate::fake::Fake;
use provider_api::*;

fn sample() -> ProvidersConfig {
    ProvidersConfig::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml"),
    )
    .unwrap()
}

fn two_entries() -> ProvidersConfig {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml"),
    )
    .unwrap();
    let entry = text.split_once("providers:\n").unwrap().1;
    let second = entry.replacen("- name: kvm2-home", "- name: kvm2-lab", 1);
    ProvidersConfig::from_yaml_str(&format!("providers:\n{entry}{second}")).unwrap()
}

/// What an implementation crate exposes (like `kvm2_provider::register`).
mod external_crate {
    use super::*;

    pub fn register(registry: &mut Registry) -> Result<(), Error> {
        registry.register(
            ProviderType::Kvm2,
            |entry: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
                let cfg = entry
                    .kvm2()
                    .ok_or_else(|| Error::permanent("not a kvm2 entry"))?;
                assert!(!cfg.hosts.is_empty());
                Ok(Arc::new(Fake::new(entry.name.as_str(), true)))
            },
        )
    }
}

#[test]
fn builds_every_entry_in_order_through_external_constructor() {
    let mut registry = Registry::new();
    external_crate::register(&mut registry).unwrap();
    assert!(registry.is_registered(ProviderType::Kvm2));
    let providers = registry.build(&two_entries()).unwrap();
    assert_eq!(providers.len(), 2);
    let names: Vec<_> = providers.iter().map(|p| p.name().to_string()).collect();
    assert_eq!(names, ["kvm2-home", "kvm2-lab"]);
    assert!(
        providers
            .get(&Identifier::parse("kvm2-lab").unwrap())
            .is_some()
    );
    assert!(format!("{registry:?}").contains("Kvm2"));
}

#[test]
fn registering_a_type_twice_is_refused() {
    let mut registry = Registry::new();
    external_crate::register(&mut registry).unwrap();
    let e = external_crate::register(&mut registry).unwrap_err();
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "a constructor for provider type kvm2 is already registered"
    );
}

#[test]
fn unregistered_type_is_a_permanent_error_naming_the_entry() {
    let e = Registry::new().build(&sample()).unwrap_err();
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "providers[0] (kvm2-home): no constructor registered for provider type kvm2"
    );
}

#[test]
fn constructor_error_keeps_its_class_and_names_the_entry() {
    let mut registry = Registry::new();
    registry
        .register(
            ProviderType::Kvm2,
            |_e: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
                Err(Error::transient("key file unreadable"))
            },
        )
        .unwrap();
    let e = registry.build(&sample()).unwrap_err();
    assert!(e.is_transient());
    assert_eq!(e.to_string(), "build providers[0] (kvm2-home)");
    let src = std::error::Error::source(&e).map(ToString::to_string);
    assert_eq!(src.as_deref(), Some("key file unreadable"));
}

#[test]
fn constructor_returning_a_misnamed_provider_is_refused() {
    let mut registry = Registry::new();
    registry
        .register(
            ProviderType::Kvm2,
            |_e: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
                Ok(Arc::new(Fake::new("other", false)))
            },
        )
        .unwrap();
    let e = registry.build(&sample()).unwrap_err();
    assert!(e.is_permanent());
    assert_eq!(
        e.to_string(),
        "providers[0] (kvm2-home): constructor returned provider other of type kvm2"
    );
}

#[test]
fn providers_are_shareable_trait_objects() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let mut registry = Registry::new();
    external_crate::register(&mut registry).unwrap();
    let providers = registry.build(&sample()).unwrap();
    let p: Arc<dyn Provider> = providers.iter().next().unwrap().clone();
    assert_send_sync(&p);
    assert_send_sync(&providers);
    assert!(!providers.is_empty());
}

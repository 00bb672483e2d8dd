#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The sample providers config in `deploy/` loads, builds a kvm2 provider
//! through the registry, and its image entry — a placeholder until the
//! guest image (`cargo xtask guest-image`) is published somewhere — is
//! refused by Create with a message saying what to do, before any host is
//! dialled or anything downloaded; with the steps its comments name done,
//! it creates a VM in the sandbox.

use crate::provider_env::Env;
use provider_api::{
    CreateRequest, ErrorClass, Identifier, InstanceState, ObjectName, OwnerUid, Placement,
    Provider, ProvidersConfig, Registry, name_from_uid,
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
    // The sample's hosts (192.0.2.11, kvm2.lan.example) are never
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

/// Issue 13, item 5: the sample, after the steps its comments name (hosts
/// and SSH files of one's own, the guest image's URL and sha256 in place of
/// the placeholder; `domain_type: qemu` because this machine has no usable
/// KVM), creates a VM in the sandbox with the sample's own machine type,
/// firmware, proxy settings and defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sample_config_with_its_steps_done_creates_a_vm() {
    let env = Env::new();
    let image = env.sandbox.guest_image.clone().expect(
        "the sandbox descriptor has no guest image: `cargo xtask sandbox up` builds and serves it",
    );
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml");
    let sample = std::fs::read_to_string(path).unwrap();
    let yaml = sample_with_steps_done(&sample, &env, &image);
    // Still the sample: its machine type, firmware, proxy and defaults.
    for kept in [
        "memory: 1GiB",
        "firmware: bios",
        "port: 3128",
        "machine_type: small",
    ] {
        assert!(yaml.contains(kept), "{kept} lost from the sample:\n{yaml}");
    }
    let provider = env.provider(&yaml, env.options());
    let owner = env.owner();
    let domain = name_from_uid(&owner).to_string();
    let inst = provider
        .create(&env.request(owner, Placement::Any))
        .await
        .unwrap();
    assert!(env.domain_exists(&domain));
    assert_eq!(env.domain_state(&domain), "running");
    let got = provider.get(&inst.id).await.unwrap();
    assert!(
        matches!(
            got.state,
            InstanceState::Provisioning | InstanceState::Running
        ),
        "{got:?}"
    );
    provider.delete(&inst.id).await.unwrap();
    assert!(!env.domain_exists(&domain));
}

/// What a user does to the sample before its first Create.
fn sample_with_steps_done(sample: &str, env: &Env, image: &testkit::GuestImage) -> String {
    let replace_once = |text: &str, from: &str, to: &str| {
        assert_eq!(text.matches(from).count(), 1, "the sample changed: {from}");
        text.replacen(from, to, 1)
    };
    let s = replace_once(sample, "name: kvm2-home", &format!("name: {}", env.entry));
    let s = replace_once(&s, "user: root", &format!("user: {}", env.sandbox.ssh.user));
    let s = replace_once(
        &s,
        "/etc/egress-proxies/kvm2-ssh/id_ed25519",
        &env.sandbox.ssh.key_path.display().to_string(),
    );
    let s = replace_once(
        &s,
        "/etc/egress-proxies/kvm2-ssh/known_hosts",
        &env.sandbox.ssh.known_hosts_path.display().to_string(),
    );
    let start = s.find("      hosts:\n").expect("the sample has hosts");
    let end = s.find("      images:\n").expect("the sample has images");
    let own_hosts = env.providers().hosts_yaml();
    let s = format!("{}      hosts:\n{own_hosts}{}", &s[..start], &s[end..]);
    let s = replace_once(
        &s,
        "https://images.invalid/egress-proxies/proxy-guest.qcow2",
        &image.url,
    );
    let s = replace_once(
        &s,
        "\"0000000000000000000000000000000000000000000000000000000000000000\"",
        &image.sha256,
    );
    replace_once(&s, "domain_type: kvm ", "domain_type: qemu ")
}

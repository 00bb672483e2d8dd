#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Create and Delete through the real stack: a local HTTP server serving a
//! qcow2 made by `qemu-img`, the sandbox's sshd, its libvirtd
//! (`qemu:///system`, TCG), real QEMU domains. Plus the adoption guard.

use crate::http_server::qcow2_image;
use std::process::Command;

use crate::http_server::{Reply, Server};
use crate::provider_env::{Env, Host, served_image, unreachable_image};
use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::OwnerMark;
use kvm2_provider::__internals::definition::domain_xml::render;
use provider_api::{
    ErrorClass, Identifier, InstanceState, OwnerUid, Placement, Provider, ProviderId, ProviderType,
    SecretString, name_from_uid,
};

fn isoinfo(args: &[&str], iso: &str) -> Vec<u8> {
    let out = Command::new("isoinfo")
        .args(args)
        .args(["-i", iso])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_runs_a_domain_is_idempotent_and_delete_keeps_the_base() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "debian", &body, "qcow2");
    let provider = env.one_host_provider(image);
    let owner = env.owner();
    let name = name_from_uid(&owner);
    let mut req = env.request(owner.clone(), Placement::Any);
    let secret = format!("SECRET-{}", testkit::names::random_hex());
    req.user_data = Some(SecretString::new(format!(
        "#cloud-config\nhostname: x\n# {secret}\n"
    )));
    let team = provider_api::Tag::new(
        Identifier::parse("team").unwrap(),
        provider_api::TagValue::parse("net").unwrap(),
    );
    req.tags.insert(team.key.clone(), team.value.clone());

    let inst = provider.create(&req).await.unwrap();
    let id = ProviderId::new(
        ProviderType::Kvm2,
        Identifier::parse(&env.entry).unwrap(),
        Identifier::parse("host1").unwrap(),
        name.clone(),
    );
    assert_eq!(inst.id, id);
    assert_eq!(inst.state, InstanceState::Provisioning);
    assert_eq!(env.domain_state(name.as_str()), "running");
    assert_eq!(server.hits(), 1);

    // The domain XML: file disks on the pool's volumes, the bridge, the mark.
    let (_, xml) = env.virsh(&["dumpxml", name.as_str()]);
    let pool_dir = env.sandbox.pool.dir.display().to_string();
    let overlay = format!("{pool_dir}/vm-{}.{name}.overlay.qcow2", env.entry);
    let seed = format!("{pool_dir}/vm-{}.{name}.seed.iso", env.entry);
    assert!(xml.contains("<domain type='qemu'"), "{xml}");
    assert!(xml.contains(&format!("<source file='{overlay}'")), "{xml}");
    assert!(xml.contains(&format!("<source file='{seed}'")), "{xml}");
    assert!(xml.contains(&env.sandbox.bridge), "{xml}");
    assert!(xml.contains(owner.as_str()), "{xml}");
    // The request's tags are stored with the mark and found by list-by-tag.
    assert!(xml.contains("team=net"), "{xml}");
    let by_team = provider.list_by_tag(&team).await.unwrap();
    assert_eq!(
        by_team.iter().map(|l| &l.id).collect::<Vec<_>>(),
        [&id],
        "{by_team:?}"
    );
    // The overlay is backed by the base, by path and format.
    let info = Command::new("qemu-img")
        .args(["info", "-U", &overlay])
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    let base_name = format!("base-{}.debian.qcow2", env.entry);
    assert!(
        info.contains(&format!("backing file: {pool_dir}/{base_name}")),
        "{info}"
    );
    assert!(info.contains("backing file format: qcow2"), "{info}");

    // The seed, read back from the uploaded volume.
    let d = String::from_utf8(isoinfo(&["-d"], &seed)).unwrap();
    assert!(d.contains("Volume id: cidata"), "{d}");
    let mut files: Vec<String> = String::from_utf8(isoinfo(&["-f", "-R"], &seed))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    files.sort();
    assert_eq!(files, ["/meta-data", "/user-data", "/vendor-data"]);
    let user = String::from_utf8(isoinfo(&["-R", "-x", "/user-data"], &seed)).unwrap();
    assert!(user.contains(&secret));
    let meta = String::from_utf8(isoinfo(&["-R", "-x", "/meta-data"], &seed)).unwrap();
    assert_eq!(
        meta,
        format!("instance-id: {name}\nlocal-hostname: {name}\n")
    );
    let vendor = String::from_utf8(isoinfo(&["-R", "-x", "/vendor-data"], &seed)).unwrap();
    assert!(vendor.contains("qemu-guest-agent"), "{vendor}");
    assert!(vendor.contains("3128"), "{vendor}");

    // Get sees it through the same provider (no guest OS: no address yet).
    let got = provider.get(&id).await.unwrap();
    assert_eq!(got.state, InstanceState::Provisioning);
    assert!(provider.checker().is_some());

    // Idempotent: the same instance, no second domain, no second download.
    let again = provider.create(&req).await.unwrap();
    assert_eq!(again.id, inst.id);
    assert_eq!(server.hits(), 1);

    // A shut-off instance is started again by Create.
    env.virsh(&["destroy", name.as_str()]);
    assert_eq!(env.domain_state(name.as_str()), "shut off");
    let again = provider.create(&req).await.unwrap();
    assert_eq!(again.id, inst.id);
    assert_eq!(env.domain_state(name.as_str()), "running");

    // Delete: domain and per-VM volumes gone, base and marker stay.
    provider.delete(&id).await.unwrap();
    assert!(!env.domain_exists(name.as_str()));
    let pool = env.sandbox.pool.name.clone();
    assert_eq!(
        env.our_volumes(&pool),
        [base_name.clone(), format!("{base_name}.marker")]
    );
    // Twice is fine.
    provider.delete(&id).await.unwrap();
    assert!(provider.get(&id).await.unwrap_err().is_not_found());

    // Half-deleted (domain gone, a volume left): finished, not an error.
    env.virsh(&[
        "vol-create-as",
        &pool,
        &format!("vm-{}.{name}.seed.iso", env.entry),
        "1M",
    ]);
    provider.delete(&id).await.unwrap();
    assert_eq!(
        env.our_volumes(&pool),
        [base_name.clone(), format!("{base_name}.marker")]
    );

    // The reverse (volumes gone, domain left) is finished too.
    provider.create(&req).await.unwrap();
    for vol in [
        format!("vm-{}.{name}.overlay.qcow2", env.entry),
        format!("vm-{}.{name}.seed.iso", env.entry),
    ] {
        let (ok, out) = env.virsh(&["vol-delete", "--pool", &pool, &vol]);
        assert!(ok, "{out}");
    }
    provider.delete(&id).await.unwrap();
    assert!(!env.domain_exists(name.as_str()));
    assert_eq!(server.hits(), 1);
}

/// Defines (does not start) a domain with `name` and the given mark, or no
/// mark, through virsh.
fn define_foreign(env: &Env, name: &Identifier, mark: Option<OwnerMark>) {
    let xml = match mark {
        Some(mark) => render(&crate::test_domain::spec(
            name.as_str(),
            "/nonexistent/disk.qcow2",
            "/nonexistent/seed.iso",
            &env.sandbox.bridge,
            mark,
        ))
        .unwrap(),
        None => format!(
            "<domain type='qemu'><name>{name}</name><memory unit='MiB'>128</memory><os><type>hvm</type></os></domain>"
        ),
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.xml");
    std::fs::write(&file, xml).unwrap();
    let (ok, out) = env.virsh(&["define", &file.display().to_string()]);
    assert!(ok, "{out}");
}

#[tokio::test]
async fn a_foreign_domain_with_the_target_name_is_refused_and_untouched() {
    let env = Env::new();
    let body = crate::http_server::image(1 << 20);
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "tiny", &body, "raw");
    let provider = env.one_host_provider(image);
    let entry = Identifier::parse(&env.entry).unwrap();

    // No mark at all, and another owner's mark.
    let unmarked = env.owner();
    let other_owner = env.owner();
    let cases = [
        (unmarked.clone(), None),
        (
            other_owner.clone(),
            Some(OwnerMark::new(
                OwnerUid::parse("somebody-else").unwrap(),
                entry.clone(),
                Timestamp::from_unix_seconds(1_700_000_000).unwrap(),
            )),
        ),
    ];
    for (owner, mark) in cases {
        let name = name_from_uid(&owner);
        define_foreign(&env, &name, mark);
        let (_, before) = env.virsh(&["dumpxml", name.as_str()]);
        let err = provider
            .create(&env.request(owner.clone(), Placement::Any))
            .await
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent, "{err}");
        assert!(err.to_string().contains("not adopted"), "{err}");
        let (_, after) = env.virsh(&["dumpxml", name.as_str()]);
        assert_eq!(before, after, "the foreign domain was modified");
        assert_eq!(env.domain_state(name.as_str()), "shut off");
        if after.contains("somebody-else") {
            // Same entry, other owner: Delete by ID is allowed to remove
            // only what carries this entry's mark; this one does.
            continue;
        }
        let id = ProviderId::new(
            ProviderType::Kvm2,
            entry.clone(),
            Identifier::parse("host1").unwrap(),
            name.clone(),
        );
        let err = provider.delete(&id).await.unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent, "{err}");
        assert!(env.domain_exists(name.as_str()));
    }
    // Nothing was downloaded for a refused create.
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn a_create_that_fails_to_start_removes_what_it_made_but_not_the_base() {
    let env = Env::new();
    let body = crate::http_server::image(1 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let image = served_image(&server, "tiny", &body, "raw");
    // A bridge the host does not have: define succeeds, start fails.
    let host = Host {
        bridge: "kvm2-nosuch0".into(),
        ..env.host("host1")
    };
    let yaml = env.providers().hosts([host]).images([image]).render();
    let provider = env.provider(&yaml, env.options());
    let owner = env.owner();
    let name = name_from_uid(&owner);

    let err = provider
        .create(&env.request(owner, Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("start domain"), "{err}");
    assert!(!env.domain_exists(name.as_str()), "the domain was left");
    let base = format!("base-{}.tiny.raw", env.entry);
    assert_eq!(
        env.our_volumes(&env.sandbox.pool.name),
        [base.clone(), format!("{base}.marker")],
        "overlay or seed left, or base removed"
    );
}

#[tokio::test]
async fn a_uefi_instance_is_deleted_with_its_nvram() {
    let env = Env::new();
    let body = crate::http_server::image(1 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let image = served_image(&server, "tiny", &body, "raw");
    let yaml = env.providers().images([image]).firmware("uefi").render();
    assert!(yaml.contains("firmware: uefi"));
    let provider = env.provider(&yaml, env.options());
    let owner = env.owner();
    let name = name_from_uid(&owner);

    let inst = provider
        .create(&env.request(owner, Placement::Any))
        .await
        .unwrap();
    let (_, xml) = env.virsh(&["dumpxml", name.as_str()]);
    let nvram = xml
        .split("<nvram")
        .nth(1)
        .and_then(|rest| rest.split('>').nth(1))
        .and_then(|rest| rest.split('<').next())
        .unwrap_or_else(|| panic!("no NVRAM in {xml}"))
        .to_owned();
    assert!(std::path::Path::new(&nvram).exists(), "{nvram}");

    provider.delete(&inst.id).await.unwrap();
    assert!(!env.domain_exists(name.as_str()));
    assert!(
        !std::path::Path::new(&nvram).exists(),
        "NVRAM left: {nvram}"
    );
}

#[tokio::test]
async fn placement_unknown_host_is_permanent_and_unreachable_host_transient() {
    let env = Env::new();
    let image = unreachable_image("tiny");
    // host2: nothing listens on its port.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let hosts = [
        env.host("host1"),
        Host {
            port,
            ..env.host("host2")
        },
    ];
    let yaml = env.yaml(&hosts, &[image], None);
    let provider = env.provider(&yaml, env.options());

    let req = env.request(
        env.owner(),
        Placement::Require(Identifier::parse("nosuch").unwrap()),
    );
    let err = provider.create(&req).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");

    let req = env.request(
        env.owner(),
        Placement::Require(Identifier::parse("host2").unwrap()),
    );
    let err = provider.create(&req).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");

    // Prefer(host2) falls back to host1, which works.
    let body = crate::http_server::image(1 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let image = served_image(&server, "tiny", &body, "raw");
    let yaml = env.yaml(&hosts, &[image], None);
    let provider = env.provider(&yaml, env.options());
    let req = env.request(
        env.owner(),
        Placement::Prefer(Identifier::parse("host2").unwrap()),
    );
    let inst = provider.create(&req).await.unwrap();
    assert_eq!(inst.host.as_str(), "host1");
    provider.delete(&inst.id).await.unwrap();
}

#[tokio::test]
async fn too_many_tags_are_refused_before_anything_is_made() {
    let env = Env::new();
    // Reaching the image download would fail Transient, not Permanent.
    let image = unreachable_image("tiny");
    let provider = env.one_host_provider(image);
    let owner = env.owner();
    let mut req = env.request(owner.clone(), Placement::Any);
    for i in 0..40 {
        req.tags.insert(
            Identifier::parse(&format!("key-{i:02}-{}", "k".repeat(50))).unwrap(),
            provider_api::TagValue::parse(&"v".repeat(64)).unwrap(),
        );
    }
    let err = provider.create(&req).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    assert!(err.to_string().contains("tags"), "{err}");
    let (defined, _) = env.virsh(&["dominfo", name_from_uid(&owner).as_str()]);
    assert!(!defined, "no domain was defined");
}

#[tokio::test]
async fn create_is_permanent_only_when_every_host_refuses_for_good() {
    let env = Env::new();
    let image = unreachable_image("tiny");
    // No host key is known: the (only) host refuses, Permanent, also for a
    // placement of Any.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("known_hosts");
    std::fs::write(&empty, "").unwrap();
    let empty = empty.display().to_string();
    let yaml = env.yaml(
        &[env.host("host1")],
        std::slice::from_ref(&image),
        Some(&empty),
    );
    let provider = env.provider(&yaml, env.options());
    let err = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");

    // One of them merely down (nothing listens): worth a retry.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let hosts = [
        env.host("host1"),
        Host {
            port,
            ..env.host("host2")
        },
    ];
    let yaml = env.yaml(&hosts, &[image], Some(&empty));
    let provider = env.provider(&yaml, env.options());
    let err = provider
        .create(&env.request(env.owner(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_larger_than_the_machine_types_disk_is_refused() {
    let env = Env::new();
    // 3 GiB of virtual disk in a tiny file; the machine type's disk is 1 GiB.
    let body = qcow2_image("3G");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "big", &body, "qcow2");
    let provider = env.one_host_provider(image);
    let owner = env.owner();
    let err = provider
        .create(&env.request(owner.clone(), Placement::Any))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    assert!(
        err.to_string()
            .contains("larger than the machine type's disk"),
        "{err}"
    );
    let (defined, _) = env.virsh(&["dominfo", name_from_uid(&owner).as_str()]);
    assert!(!defined, "no domain was defined");
}

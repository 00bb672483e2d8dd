#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Get's state table against libvirt's test driver (`test:///default`)
//! through the sandbox's sshd: states a real QEMU domain cannot reach
//! cheaply (paused by a user, suspended by guest power management, shut
//! down) and the running-with-address row (the test driver makes up an
//! interface address).
//!
//! The test driver keeps its state per connection, so the domain is defined
//! and driven on the host table's own shared connection, the one `get` uses.
//! States no API call reaches on the test driver (crashed, pmsuspended, no
//! state, blocked, shutting down) come from a test driver *file*
//! (`test:///path/node.xml`), whose domains start in the state their
//! `<test:runstate>` names (reason 0).

use crate::sandbox_hosts::*;
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::operations::get;
use libvirt_rpc::{Domain, DomainCreateFlags, DomainDefineFlags, NoFlags};
use provider_api::{InstanceState, ProviderId, ProviderType};
use testkit::Descriptor;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libvirt_states_map_to_instance_states() {
    let sandbox = Descriptor::require();
    let table = HostTable::new(
        &sandbox_config(&sandbox),
        &options(&sandbox, &sandbox.libvirt.test_uri),
    )
    .unwrap();
    let host = id("host1");
    let conn = table.shared(&host).await.unwrap();
    let client = conn.client().clone();
    let name = unique("states");
    let dir = tempfile::tempdir().unwrap();
    let xml = domain_xml(
        &sandbox,
        &name,
        dir.path(),
        Some(mark(ENTRY, "5ea7e0aa-0000-4000-8000-000000000001")),
    );
    let dom: Domain = client
        .domain_define_xml_flags(&xml, DomainDefineFlags::empty())
        .await
        .unwrap();
    let pid = ProviderId::new(ProviderType::Kvm2, id(ENTRY), host.clone(), id(&name));
    let entry = id(ENTRY);
    let read = || async { get(&table, &entry, &pid).await.unwrap() };

    // Defined, never started: shut off.
    let i = read().await;
    assert_eq!((i.state, i.ip), (InstanceState::Stopped, None));

    // Running (booted), with the address the test driver reports.
    client
        .domain_create_with_flags(&dom, DomainCreateFlags::empty())
        .await
        .unwrap();
    let i = read().await;
    assert_eq!(i.state, InstanceState::Running, "{i:?}");
    assert!(i.ip.is_some(), "running with an address: {i:?}");

    // Paused by a user: it serves nothing until someone resumes it.
    client.domain_suspend(&dom).await.unwrap();
    assert_eq!(
        read().await.state,
        InstanceState::Failed {
            reason: "paused: paused by user".into()
        }
    );
    client.domain_resume(&dom).await.unwrap();
    assert_eq!(read().await.state, InstanceState::Running);

    client
        .domain_destroy_flags(&dom, libvirt_rpc::DomainDestroyFlags::empty())
        .await
        .unwrap();
    let i = read().await;
    assert_eq!((i.state, i.ip), (InstanceState::Stopped, None));

    // Shut down by the guest.
    client
        .domain_create_with_flags(&dom, DomainCreateFlags::empty())
        .await
        .unwrap();
    client.domain_shutdown(&dom).await.unwrap();
    let state = client
        .domain_get_state(&dom, NoFlags::empty())
        .await
        .unwrap();
    assert_eq!(
        (state.state.to_wire(), state.reason),
        (5, 1),
        "shut off: shut down"
    );
    assert_eq!(read().await.state, InstanceState::Stopped);

    client
        .domain_undefine_flags(&dom, libvirt_rpc::DomainUndefineFlags::empty())
        .await
        .unwrap();
    conn.close().await;
}

/// One domain per libvirt state, each with our mark, in a test driver node
/// file the daemon loads.
/// Plus one running domain whose NIC names a network the test driver does
/// not have: every address source fails for it.
fn node_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<(String, i32)>, String) {
    use kvm2_provider::__internals::definition::MARK_NAMESPACE;
    let mut domains = String::new();
    let mut names = Vec::new();
    let no_network = format!("{}-nonet", unique("rs"));
    for state in 0..=8 {
        let (name, nic) = if state == 8 {
            (
                no_network.clone(),
                "<interface type='network'><source network='nowhere'/></interface>",
            )
        } else {
            (
                format!("{}-{state}", unique("rs")),
                "<interface type='bridge'><source bridge='kvm2-sbx0'/></interface>",
            )
        };
        let runstate = if state == 8 { 1 } else { state };
        domains.push_str(&format!(
            "<domain type='test' xmlns:test='http://libvirt.org/schemas/domain/test/1.0'>\
             <name>{name}</name><memory>65536</memory><os><type>hvm</type></os>\
             <devices>{nic}</devices>\
             <metadata><kvm2:instance xmlns:kvm2='{MARK_NAMESPACE}'>\
             <kvm2:owner-uid>5ea7e0aa-0000-4000-8000-00000000000{state}</kvm2:owner-uid>\
             <kvm2:entry>{ENTRY}</kvm2:entry><kvm2:created-at>2026-12-02T09:15:16Z</kvm2:created-at>\
             </kvm2:instance></metadata><test:runstate>{runstate}</test:runstate></domain>\n"
        ));
        if state < 8 {
            names.push((name, state));
        }
    }
    let path = dir.join("node.xml");
    std::fs::write(&path, format!("<node>\n{domains}</node>\n")).unwrap();
    (path, names, no_network)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_libvirt_state_from_a_test_driver_file() {
    use std::os::unix::fs::PermissionsExt;
    let sandbox = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (file, domains, no_network) = node_file(dir.path());
    let table = HostTable::new(
        &sandbox_config(&sandbox),
        &options(&sandbox, &format!("test://{}", file.display())),
    )
    .unwrap();
    let entry = id(ENTRY);
    let failed = |reason: &str| InstanceState::Failed {
        reason: reason.into(),
    };
    for (name, state) in domains {
        let pid = ProviderId::new(ProviderType::Kvm2, entry.clone(), id("host1"), id(&name));
        let i = get(&table, &entry, &pid).await.unwrap();
        let expected = match state {
            0 => InstanceState::Provisioning,
            1 | 2 => InstanceState::Running,
            3 => failed("paused"),
            4 | 5 => InstanceState::Stopped,
            6 => failed("crashed"),
            7 => failed("suspended by guest power management"),
            _ => unreachable!(),
        };
        assert_eq!(i.state, expected, "libvirt state {state}: {i:?}");
        assert_eq!(
            i.ip.is_some(),
            matches!(state, 1 | 2),
            "state {state}: {i:?}"
        );
    }
    // Invariant 8, the other half: the link is fine but every address source fails
    // for a running domain: Transient, not "no address yet".
    let pid = ProviderId::new(
        ProviderType::Kvm2,
        entry.clone(),
        id("host1"),
        id(&no_network),
    );
    let err = get(&table, &entry, &pid).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert!(err.to_string().contains("every source failed"), "{err}");
    table.shared(&id("host1")).await.unwrap().close().await;
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Get and List-by-tag through the sandbox's real sshd to its real libvirtd,
//! on real QEMU domains (TCG, no guest OS) defined with the ownership mark.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sandbox_hosts::*;
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::operations::{get, list_by_tag};
use provider_api::{ErrorClass, InstanceState, ProviderId, ProviderType, Tag, TagValue};
use testkit::Descriptor;

fn table(sandbox: &Descriptor) -> HostTable {
    HostTable::new(
        &sandbox_config(sandbox),
        &options(sandbox, &sandbox.libvirt.qemu_uri),
    )
    .unwrap()
}

fn pid(host: &str, name: &str) -> ProviderId {
    ProviderId::new(ProviderType::Kvm2, id(ENTRY), id(host), id(name))
}

const OWNER: &str = "6a1f0c2e-1111-4222-8333-444455556666";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_running_domain_without_guest_is_provisioning_without_address() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let name = unique("run");
    let m = mark(ENTRY, OWNER);
    let dom = QemuDomain::define(&sandbox, &client, &name, Some(m.clone()), true).await;
    let state = client
        .domain_get_state(&dom.domain, libvirt_rpc::NoFlags::empty())
        .await
        .unwrap();
    assert_eq!(state.state, libvirt_rpc::DomainState::Running, "QEMU runs");
    let table = table(&sandbox);

    let instance = get(&table, &id(ENTRY), &pid("host1", &name)).await.unwrap();
    assert_eq!(instance.state, InstanceState::Provisioning);
    assert_eq!(instance.ip, None);
    assert_eq!(instance.host, id("host1"));
    assert_eq!(instance.id, pid("host1", &name));
    assert_eq!(instance.created_at, Some(m.created_at().to_system_time()));
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_defined_but_stopped_domain_is_stopped() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let name = unique("off");
    let _dom = QemuDomain::define(&sandbox, &client, &name, Some(mark(ENTRY, OWNER)), false).await;
    let instance = get(&table(&sandbox), &id(ENTRY), &pid("host1", &name))
        .await
        .unwrap();
    assert_eq!(instance.state, InstanceState::Stopped);
    assert_eq!(instance.ip, None);
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_missing_domain_is_not_found() {
    let sandbox = Descriptor::require();
    let err = get(&table(&sandbox), &id(ENTRY), &pid("host1", &unique("gone")))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound, "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_foreign_domains_and_ids_are_permanent() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let table = table(&sandbox);
    let unmarked = unique("nomark");
    let _a = QemuDomain::define(&sandbox, &client, &unmarked, None, false).await;
    let other_entry = unique("other");
    let _b = QemuDomain::define(
        &sandbox,
        &client,
        &other_entry,
        Some(mark("kvm2-elsewhere", OWNER)),
        false,
    )
    .await;

    for name in [&unmarked, &other_entry] {
        let err = get(&table, &id(ENTRY), &pid("host1", name))
            .await
            .unwrap_err();
        assert_eq!(err.class(), ErrorClass::Permanent, "{name}: {err:?}");
    }
    // An ID of another entry, and a host this entry does not have.
    let foreign_id = ProviderId::new(
        ProviderType::Kvm2,
        id("kvm2-elsewhere"),
        id("host1"),
        id(&other_entry),
    );
    let err = get(&table, &id(ENTRY), &foreign_id).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    let err = get(&table, &id(ENTRY), &pid("host9", &other_entry))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_by_tag_sees_this_entrys_marked_domains_only() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let ours = unique("ours");
    let _a = QemuDomain::define(&sandbox, &client, &ours, Some(mark(ENTRY, OWNER)), false).await;
    let theirs = unique("theirs");
    let _b = QemuDomain::define(
        &sandbox,
        &client,
        &theirs,
        Some(mark("kvm2-elsewhere", OWNER)),
        false,
    )
    .await;
    let unmarked = unique("bare");
    let _c = QemuDomain::define(&sandbox, &client, &unmarked, None, false).await;
    let tagged = unique("tagged");
    let team = Tag::new(id("team"), TagValue::parse("blue").unwrap());
    let tagged_mark = mark(ENTRY, OWNER)
        .with_tags(&[(team.key.clone(), team.value.clone())].into())
        .unwrap();
    let _d = QemuDomain::define(&sandbox, &client, &tagged, Some(tagged_mark), false).await;

    let table = table(&sandbox);
    let listed = list_by_tag(&table, &id(ENTRY), &Tag::managed())
        .await
        .unwrap();
    let found = listed
        .iter()
        .find(|l| l.id == pid("host1", &ours))
        .expect("our marked domain is listed");
    assert_eq!(found.owner_uid.as_str(), OWNER);
    assert_eq!(
        found.tags.get(&Tag::managed().key),
        Some(&Tag::managed().value)
    );
    assert!(found.created_at.is_some());
    for name in [&theirs, &unmarked] {
        assert!(
            listed
                .iter()
                .all(|l| l.id.instance().as_str() != name.as_str()),
            "{name} must not be listed: {listed:?}"
        );
    }
    // The tagged one carries both tags; a query for its extra tag finds it
    // and not the untagged one.
    let listed_tagged = listed
        .iter()
        .find(|l| l.id == pid("host1", &tagged))
        .expect("the tagged domain is listed under the ownership tag");
    assert_eq!(listed_tagged.tags.get(&team.key), Some(&team.value));
    assert_eq!(
        listed_tagged.tags.get(&Tag::managed().key),
        Some(&Tag::managed().value)
    );
    let by_team = list_by_tag(&table, &id(ENTRY), &team).await.unwrap();
    assert!(
        by_team.iter().any(|l| l.id == pid("host1", &tagged)),
        "{by_team:?}"
    );
    assert!(
        by_team.iter().all(|l| l.id != pid("host1", &ours)),
        "{by_team:?}"
    );
    let no_one = Tag::new(id("team"), TagValue::parse("green").unwrap());
    assert!(
        list_by_tag(&table, &id(ENTRY), &no_one)
            .await
            .unwrap()
            .is_empty()
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_by_tag_fails_whole_when_one_host_is_unreachable() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let ours = unique("half");
    let _a = QemuDomain::define(&sandbox, &client, &ours, Some(mark(ENTRY, OWNER)), false).await;
    // host2: a port nothing listens on.
    let closed = testkit::free_port();
    let config = providers(&sandbox)
        .hosts([
            Host::sandbox(&sandbox, "host1"),
            Host::sandbox(&sandbox, "host2").at_loopback_port(closed),
        ])
        .kvm2();
    let mut opts = options(&sandbox, &sandbox.libvirt.qemu_uri);
    opts.dial_budget = Duration::from_secs(10);
    let table = HostTable::new(&config, &opts).unwrap();
    let err = list_by_tag(&table, &id(ENTRY), &Tag::managed())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Transient, "{err:?}");
    assert!(err.to_string().contains("host2"), "{err}");
    client.close().await;
}

/// Records the `procedure` of every libvirt span.
struct Procedures(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Procedures {
    fn on_new_span(
        &self,
        attrs: &tracing::span::Attributes<'_>,
        _id: &tracing::span::Id,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        struct V(Option<String>);
        impl tracing::field::Visit for V {
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                if f.name() == "procedure" {
                    self.0 = Some(v.to_owned());
                }
            }
            fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
        }
        let mut v = V(None);
        attrs.record(&mut v);
        if let Some(p) = v.0 {
            self.0.lock().unwrap().push(p);
        }
    }
}

// current_thread: the recording subscriber is thread-local.
#[tokio::test(flavor = "current_thread")]
async fn list_by_tag_makes_one_listing_call_and_mark_reads_only() {
    use tracing_subscriber::layer::SubscriberExt;
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let ours = unique("calls");
    let _a = QemuDomain::define(&sandbox, &client, &ours, Some(mark(ENTRY, OWNER)), true).await;
    let table = table(&sandbox);
    table.shared(&id("host1")).await.unwrap(); // dial outside the record

    let seen = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry().with(Procedures(seen.clone()));
    let listed = {
        let _guard = tracing::subscriber::set_default(subscriber);
        list_by_tag(&table, &id(ENTRY), &Tag::managed())
            .await
            .unwrap()
    };
    assert!(listed.iter().any(|l| l.id == pid("host1", &ours)));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.iter()
            .filter(|p| *p == "connect_list_all_domains")
            .count(),
        1,
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .all(|p| p == "connect_list_all_domains" || p == "domain_get_metadata"),
        "no state or address calls: {seen:?}"
    );
    client.close().await;
}

fn virsh(sandbox: &Descriptor, args: &[&str]) -> String {
    testkit::virsh::Virsh::qemu(sandbox).ok(args)
}

/// Polls Get until the instance is Failed (QEMU's death reaches libvirt
/// through its monitor socket asynchronously), for at most 20 s.
async fn failed_within(table: &HostTable, id: &ProviderId) -> String {
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let instance = get(table, &provider_api::Identifier::parse(ENTRY).unwrap(), id)
            .await
            .unwrap();
        match instance.state {
            InstanceState::Failed { reason } => return reason,
            other if std::time::Instant::now() > until => {
                panic!("still {other:?} after 20 s")
            }
            _ => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_paused_domain_is_failed_with_libvirts_reason() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let name = unique("paused");
    let _dom = QemuDomain::define(&sandbox, &client, &name, Some(mark(ENTRY, OWNER)), true).await;
    virsh(&sandbox, &["suspend", &name]);
    let reason = failed_within(&table(&sandbox), &pid("host1", &name)).await;
    assert_eq!(reason, "paused: paused by user");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_domain_whose_qemu_was_killed_is_failed() {
    let sandbox = Descriptor::require();
    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let name = unique("killed");
    let _dom = QemuDomain::define(&sandbox, &client, &name, Some(mark(ENTRY, OWNER)), true).await;
    // The QEMU process backing the domain (its command line names the guest).
    let pgrep = std::process::Command::new("pgrep")
        .args(["-f", &format!("guest={name},")])
        .output()
        .unwrap();
    let pids = String::from_utf8_lossy(&pgrep.stdout).into_owned();
    let qemu = pids.split_whitespace().next().expect("a QEMU process");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", qemu])
        .status()
        .unwrap();
    assert!(killed.success());
    let reason = failed_within(&table(&sandbox), &pid("host1", &name)).await;
    assert_eq!(reason, "shut off: crashed");
    // libvirt's own record of the death agrees.
    let state = virsh(&sandbox, &["domstate", "--reason", &name]);
    assert!(state.contains("shut off (crashed)"), "{state}");
    client.close().await;
}

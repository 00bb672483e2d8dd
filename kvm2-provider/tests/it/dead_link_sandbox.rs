#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The address rule (invariant 8): the shared connection dies under a running instance's Get,
//! at the address lookup. The original read every address-source error as
//! "no address yet" and reported a serving proxy as Provisioning without its
//! IP; the answer must be a Transient error instead.
//!
//! The link runs through a relay; a tracing layer cuts the relay the moment
//! the first address call's span opens (every libvirt call goes through
//! `observe`), so the link dies exactly there, deterministically.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sandbox_hosts::*;
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::operations::get;
use provider_api::{ErrorClass, InstanceState, ProviderId, ProviderType};
use testkit::Descriptor;
use testkit::relay::Relay;
use testkit::sshd::known_hosts_with_port;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

/// Cuts the relay when a span for a procedure starting with `prefix` opens.
struct CutOnCall {
    relay: Arc<Relay>,
    prefix: &'static str,
    armed: Arc<AtomicUsize>,
}

struct Procedure(Option<String>);

impl Visit for Procedure {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "procedure" {
            self.0 = Some(value.to_owned());
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "procedure" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for CutOnCall {
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        let mut p = Procedure(None);
        attrs.record(&mut p);
        if self.armed.load(Ordering::SeqCst) > 0
            && p.0.is_some_and(|name| name.starts_with(self.prefix))
        {
            self.relay.cut();
        }
    }
}

// current_thread: the subscriber set below is thread-local and every poll
// (including the libvirt-rpc and SSH tasks) happens on this thread.
#[tokio::test(flavor = "current_thread")]
async fn link_killed_during_get_is_transient_not_provisioning() {
    let sandbox = Descriptor::require();
    let relay = Arc::new(Relay::tcp(format!("{}:{}", sandbox.ssh.host, sandbox.ssh.port)).await);
    let armed = Arc::new(AtomicUsize::new(0));
    let subscriber = tracing_subscriber::registry().with(CutOnCall {
        relay: relay.clone(),
        prefix: "domain_interface_addresses",
        armed: armed.clone(),
    });
    let _guard = tracing::subscriber::set_default(subscriber);

    let client = crate::sandbox_hosts::direct(&sandbox).await;
    let name = unique("h3");
    let _dom = QemuDomain::define(
        &sandbox,
        &client,
        &name,
        Some(mark(ENTRY, "0d3c0ffe-0000-4000-8000-00000000h3h3")),
        true,
    )
    .await;

    let dir = tempfile::tempdir().unwrap();
    let known_hosts = known_hosts_with_port(&sandbox, dir.path(), relay.port());
    let config = providers(&sandbox)
        .hosts([Host::sandbox(&sandbox, "host1").at_loopback_port(relay.port())])
        .known_hosts(&known_hosts)
        .kvm2();
    let table = HostTable::new(&config, &options(&sandbox, &sandbox.libvirt.qemu_uri)).unwrap();
    let id = ProviderId::new(ProviderType::Kvm2, id(ENTRY), id("host1"), id(&name));

    // Through the intact relay: running, no guest OS, so no address yet.
    let before = get(&table, &crate::sandbox_hosts::id(ENTRY), &id)
        .await
        .unwrap();
    assert_eq!(before.state, InstanceState::Provisioning);

    // Now the link dies at the first address call.
    armed.store(1, Ordering::SeqCst);
    let during = get(&table, &crate::sandbox_hosts::id(ENTRY), &id).await;
    match during {
        Err(e) => assert_eq!(e.class(), ErrorClass::Transient, "{e:?}"),
        Ok(instance) => panic!(
            "a dead link must be Transient, not a successful {:?} without an address",
            instance.state
        ),
    }
    client.close().await;
}

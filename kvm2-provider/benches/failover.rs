//! `cargo xtask bench kvm2-provider -- --bench failover` (or `cargo bench -p
//! kvm2-provider --bench failover` with the sandbox up): how soon a killed
//! QEMU is known, event-driven vs poll-only, in the same run.
//!
//! Each round creates an instance (a blank 64 MiB qcow2 on the sandbox's
//! host1, real QEMU under TCG), kills its QEMU, and measures until:
//! - *events*: the provider's instance events report it
//!   (`Provider::instance_events`, libvirt's lifecycle event);
//! - *poll*: a `get` loop at the operator's running-proxy poll interval
//!   (60 s; `FAILOVER_POLL_SECS` changes it) answers Failed/Stopped — the
//!   loop's phase is random against the kill, as the operator's is.
//!
//! Both watch the same kill. Prints the medians and the ratio (poll /
//! events: how many times sooner events are). Nothing is asserted.
//! `FAILOVER_ROUNDS` (default 3).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout
)]

#[allow(dead_code)]
#[path = "../tests/it/http_server.rs"]
mod common;

use std::time::{Duration, Instant};

use kvm2_provider::{HostOptions, Kvm2Provider, ProviderOptions};
use libvirt_rpc::Config as RpcConfig;
use provider_api::{
    CreateRequest, Identifier, InstanceEvent, InstanceState, ObjectName, OwnerUid, Placement,
    Provider,
};
use testkit::Descriptor;
use testkit::bench::median;
use testkit::providers_yaml::{Image, ProvidersYaml};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let d = Descriptor::require();
    let rounds = env_or("FAILOVER_ROUNDS", 3) as usize;
    let poll = Duration::from_secs(env_or("FAILOVER_POLL_SECS", 60));
    let rt = testkit::bench::runtime();
    rt.block_on(async {
        let body = common::qcow2_image("64M");
        let server = common::serve_body(&body).await;
        let entry = format!("kvm2-fo{}", &testkit::names::random_hex()[..8]);
        let config = ProvidersYaml::sandbox(&d, &entry)
            .images([Image::new(
                "tiny",
                server.url("/tiny.qcow2").to_string(),
                common::digest(&body).to_string(),
                "qcow2",
            )])
            .kvm2();
        let mut options = ProviderOptions::default();
        options.hosts = HostOptions {
            remote_socket: d.remote_socket.display().to_string(),
            dial_budget: Duration::from_secs(30),
            rpc: RpcConfig::default().call_timeout(Duration::from_secs(60)),
            ..HostOptions::default()
        };
        options.start_watch = Duration::ZERO;
        let provider =
            Kvm2Provider::with_options(Identifier::parse(&entry).unwrap(), config, options)
                .unwrap();
        let mut events = provider.instance_events().unwrap();
        let (mut by_event, mut by_poll) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let owner = OwnerUid::parse(&format!("uid-{}", testkit::names::random_hex())).unwrap();
            let mut req = CreateRequest::new(
                owner,
                ObjectName::parse("bench").unwrap(),
                Identifier::parse("default").unwrap(),
            );
            req.placement = Placement::Require(Identifier::parse("host1").unwrap());
            let inst = provider.create(&req).await.unwrap();
            let pid =
                std::fs::read_to_string(format!("/run/libvirt/qemu/{}.pid", inst.id.instance()))
                    .unwrap();
            // The poll loop's phase against the kill: anywhere in one interval.
            let phase = poll.mul_f64(f64::from((round as u32 * 7919 + 13) % 100) / 100.0);
            let poll_started = Instant::now();
            let killer = async {
                tokio::time::sleep(phase).await;
                let killed = Instant::now();
                let ok = std::process::Command::new("kill")
                    .args(["-KILL", pid.trim()])
                    .status()
                    .unwrap()
                    .success();
                assert!(ok);
                killed
            };
            let poller = async {
                let mut next = poll_started;
                loop {
                    tokio::time::sleep_until(next.into()).await;
                    let state = provider.get(&inst.id).await.map(|i| i.state);
                    if matches!(
                        state,
                        Ok(InstanceState::Failed { .. } | InstanceState::Stopped)
                    ) || state.is_err()
                    {
                        return Instant::now();
                    }
                    next += poll;
                }
            };
            let id = inst.id.clone();
            let watcher = async {
                loop {
                    match events.next().await {
                        Some(InstanceEvent::Changed { id: i, change })
                            if i == id && change != provider_api::Change::Started =>
                        {
                            return Instant::now();
                        }
                        Some(_) => {}
                        None => panic!("the watch ended"),
                    }
                }
            };
            let (killed, polled, evented) = tokio::join!(killer, poller, watcher);
            let (e, p) = (evented - killed, polled - killed);
            println!("round {round}: events {e:.2?}, poll every {poll:?} {p:.2?}");
            by_event.push(e.as_secs_f64());
            by_poll.push(p.as_secs_f64());
            provider.delete(&inst.id).await.unwrap();
        }
        let (e, p) = (median(&by_event), median(&by_poll));
        println!(
            "failover detection of a killed QEMU (median of {rounds}): events {e:.2} s, \
             poll-only {p:.2} s: events {:.1}x sooner",
            p / e
        );
        drop(events);
    });
}

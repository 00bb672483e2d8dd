//! `cargo xtask bench kvm2-provider --bench placement` (the sandbox with
//! four hosts: `cargo xtask sandbox up --hosts 4` first): 40 owners over 4
//! hosts of unequal `max_instances` (4, 8, 12, 16: exactly 40 places),
//! created one after another with `Placement::Any`, against the peer in the
//! same run: hash-only placement (each owner required onto the host its
//! hash picks, the capacity check after the choice — what the Go original
//! and this provider before issue 26 did).
//!
//! Prints, for each: instances per host against its limit, the Creates
//! answered QuotaExceeded (each an operator wait of 5 minutes, landing on
//! the same full host again for hash-only), and the final skew (the
//! largest fill fraction less the smallest). Real QEMU domains (a blank
//! 64 MiB qcow2, 128 MiB each) under TCG; everything is deleted after each
//! side. Nothing is asserted.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::print_stdout
)]

#[allow(dead_code)]
#[path = "../tests/it/http_server.rs"]
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kvm2_provider::{HostOptions, Kvm2Provider, ProviderOptions};
use libvirt_rpc::Config as RpcConfig;
use provider_api::{
    CreateRequest, ErrorClass, Identifier, ObjectName, OwnerUid, Placement, Provider, ProviderId,
};
use sha2::{Digest, Sha256};
use testkit::Descriptor;
use testkit::providers_yaml::{Host, Image, ProvidersYaml};

const LIMITS: [u32; 4] = [4, 8, 12, 16];
const OWNERS: usize = 40;

fn main() {
    let d = Descriptor::require();
    if d.hosts.len() < LIMITS.len() {
        println!(
            "placement bench: the sandbox has {} host(s); it needs {} \
             (`cargo xtask sandbox down && cargo xtask sandbox up --hosts 4`)",
            d.hosts.len(),
            LIMITS.len()
        );
        return;
    }
    let rt = testkit::bench::runtime();
    rt.block_on(async {
        let body = common::qcow2_image("64M");
        let server = common::serve_body(&body).await;
        let image = Image::new(
            "tiny",
            server.url("/tiny.qcow2").to_string(),
            common::digest(&body).to_string(),
            "qcow2",
        );
        let hosts: Vec<Host> = d.hosts[..LIMITS.len()]
            .iter()
            .zip(LIMITS)
            .map(|(h, n)| Host::hypervisor(&d, h).with_max_instances(n))
            .collect();
        let owners: Vec<OwnerUid> = (0..OWNERS)
            .map(|i| OwnerUid::parse(&format!("uid-bench-{i:03}-{}", testkit::names::random_hex())).unwrap())
            .collect();
        for side in ["fleet (ours)", "hash-only (peer)"] {
            let entry = format!("kvm2-pl{}", &testkit::names::random_hex()[..8]);
            let config = ProvidersYaml::sandbox(&d, &entry)
                .hosts(hosts.clone())
                .images([image.clone()])
                .kvm2();
            let mut options = ProviderOptions::default();
            options.hosts = HostOptions {
                dial_budget: Duration::from_secs(30),
                rpc: RpcConfig::default().call_timeout(Duration::from_secs(60)),
                ..HostOptions::default()
            };
            options.start_watch = Duration::ZERO;
            let provider =
                Kvm2Provider::with_options(Identifier::parse(&entry).unwrap(), config, options)
                    .unwrap();
            let started = Instant::now();
            let mut made: Vec<ProviderId> = Vec::new();
            let mut quota = 0usize;
            for owner in &owners {
                let mut req = CreateRequest::new(
                    owner.clone(),
                    ObjectName::parse("bench").unwrap(),
                    Identifier::parse("default").unwrap(),
                );
                req.placement = if side.starts_with("hash") {
                    Placement::Require(hash_host(owner, &hosts))
                } else {
                    Placement::Any
                };
                match provider.create(&req).await {
                    Ok(inst) => made.push(inst.id),
                    Err(e) if e.class() == ErrorClass::QuotaExceeded => quota += 1,
                    Err(e) => panic!("{side}: {e}"),
                }
            }
            let took = started.elapsed();
            let mut per_host: BTreeMap<String, u32> = BTreeMap::new();
            for id in &made {
                *per_host.entry(id.host().to_string()).or_default() += 1;
            }
            let fill: Vec<f64> = hosts
                .iter()
                .zip(LIMITS)
                .map(|(h, n)| f64::from(per_host.get(&h.name).copied().unwrap_or(0)) / f64::from(n))
                .collect();
            let skew = fill.iter().copied().fold(f64::MIN, f64::max)
                - fill.iter().copied().fold(f64::MAX, f64::min);
            let placed: Vec<String> = hosts
                .iter()
                .zip(LIMITS)
                .map(|(h, n)| format!("{} {}/{n}", h.name, per_host.get(&h.name).copied().unwrap_or(0)))
                .collect();
            println!(
                "{side}: {} of {OWNERS} placed [{}], {quota} QuotaExceeded, skew {skew:.2}, {took:.1?}",
                made.len(),
                placed.join(", ")
            );
            for id in &made {
                provider.delete(id).await.unwrap();
            }
        }
    });
}

/// The host an owner's hash picks among `hosts` (the peer's placement).
fn hash_host(owner: &OwnerUid, hosts: &[Host]) -> Identifier {
    let digest = Sha256::digest(owner.as_str().as_bytes());
    let i = usize::from(digest[0]) % hosts.len();
    Identifier::parse(&hosts[i].name).unwrap()
}

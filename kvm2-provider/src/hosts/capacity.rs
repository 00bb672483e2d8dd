//! Host capacity: checked before a domain is defined, so a full host
//! answers QuotaExceeded (wait long, or go elsewhere) instead of a start
//! failure retried forever as Transient.
//!
//! ```text
//!  NodeGetInfo (logical CPUs) ──┬─▶ check_compute(machine type, reserved) ─▶ Ok
//!  NodeGetMemoryStats (bytes) ──┘   (placement's admission)                └▶ QuotaExceeded naming
//!  pool free space (refreshed) ───▶ check_pool(seed + overlay reserve)         each resource short
//! ```
//!
//! What is checked, per Create (vCPUs and memory when placement admits a
//! host, before the image is fetched to it; pool space once the seed is
//! built):
//! * **vCPUs**: the machine type's vCPUs against the host's logical CPUs (a
//!   VM cannot usefully have more; the sum over VMs is not checked —
//!   overcommitting CPUs across VMs is normal).
//! * **Memory**: the machine type's memory against the memory the host can
//!   give a new VM: free memory plus buffers and page cache
//!   (`virNodeGetMemoryStats`), which the kernel reclaims on demand. A
//!   hypervisor's page cache normally fills its RAM, so free memory alone
//!   would refuse VMs on a host with room (as it did on the sandbox after
//!   a build). Where the stats lack those fields, free memory alone
//!   (`virNodeGetFreeMemory`). The host's `reserved_memory` (config) is
//!   kept out of it.
//! * **Pool space**: the seed ISO plus the overlay's reserve
//!   ([`ProviderOptions::overlay_reserve`](crate::ProviderOptions), default
//!   1 GiB: overlays are thin, so the machine type's whole disk is not
//!   reserved) against the pool's free space.
//!
//! A start that still fails for lack of memory or disk (another VM took it
//! meanwhile) is classed QuotaExceeded too ([`start_failure_class`]).

use libvirt_rpc::Client;
use libvirt_rpc::proto::xdr::{Decode, Reader, XdrError};
use provider_api::config::MachineType;
use provider_api::{Error as ApiError, ErrorClass, Identifier};

use crate::libvirt::{observed, to_provider_error};
use libvirt_rpc::proc_num;

/// `remote_node_get_info_ret`: `char model[32]` (32 XDR ints), `memory`
/// (KiB), `cpus`, `mhz`, `nodes`, `sockets`, `cores`, `threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodeInfo {
    cpus: i32,
}

impl Decode for NodeInfo {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        for _ in 0..32 {
            i32::decode(r)?;
        }
        let _memory_kib = u64::decode(r)?;
        let cpus = i32::decode(r)?;
        for _ in 0..5 {
            i32::decode(r)?;
        }
        Ok(Self { cpus })
    }
}

/// Reads the host's CPUs and free memory on `client`.
///
/// # Errors
/// As the [error table](crate::libvirt::errors).
pub(crate) async fn cpus_and_free_memory(
    host: &Identifier,
    client: &Client,
) -> Result<(u32, u64), ApiError> {
    let info: NodeInfo = observed(
        host,
        proc_num::NODE_GET_INFO,
        client.call(proc_num::NODE_GET_INFO, &()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {host}: node info"), e))?;
    let stats = memory_stats(host, client).await?;
    let available = match reclaimable_kib(&stats) {
        Some(kib) => kib.saturating_mul(1024),
        None => observed(
            host,
            proc_num::NODE_GET_FREE_MEMORY,
            client.call(proc_num::NODE_GET_FREE_MEMORY, &()),
        )
        .await
        .map_err(|e| to_provider_error(format!("host {host}: free memory"), e))?,
    };
    Ok((u32::try_from(info.cpus).unwrap_or(0), available))
}

/// `VIR_NODE_MEMORY_STATS_ALL_CELLS`: the whole host.
const ALL_CELLS: i32 = -1;

/// `virNodeGetMemoryStats` for the whole host as libvirt's own clients call
/// it: first with no room to learn how many parameters the host has, then
/// with exactly that many (libvirtd's Linux driver refuses any other
/// count, so the generated call, which offers the protocol's maximum,
/// cannot be used).
async fn memory_stats(
    host: &Identifier,
    client: &Client,
) -> Result<Vec<libvirt_rpc::remote::NodeGetMemoryStats>, ApiError> {
    let wrap = |e| to_provider_error(format!("host {host}: memory stats"), e);
    let mut count = 0i32;
    // Two asks: the count, then the parameters.
    for _ in 0..2 {
        let args = (count, ALL_CELLS, 0u32);
        let ret: libvirt_rpc::remote::NodeGetMemoryStatsRet = observed(
            host,
            proc_num::NODE_GET_MEMORY_STATS,
            client.call(proc_num::NODE_GET_MEMORY_STATS, &args),
        )
        .await
        .map_err(wrap)?;
        if count > 0 || ret.nparams <= 0 {
            return Ok(ret.params);
        }
        count = ret.nparams;
    }
    Ok(Vec::new())
}

/// Free + buffers + cached, in KiB, from `virNodeGetMemoryStats` (libvirt
/// reports KiB); `None` unless all three are there.
fn reclaimable_kib(stats: &[libvirt_rpc::remote::NodeGetMemoryStats]) -> Option<u64> {
    let field = |name: &str| stats.iter().find(|s| s.field == name).map(|s| s.value);
    field("free")?
        .checked_add(field("buffers")?)?
        .checked_add(field("cached")?)
}

/// Checks that a host with `cpus` logical CPUs and `memory` bytes it can
/// give, keeping `reserved` of them, takes one VM of `machine`.
///
/// # Errors
/// QuotaExceeded naming each resource that is short, with both figures.
pub fn check_compute(
    host: &Identifier,
    cpus: u32,
    memory: u64,
    reserved: u64,
    machine: &MachineType,
) -> Result<(), ApiError> {
    let mut short = Vec::new();
    if machine.vcpus > cpus {
        short.push(format!(
            "vCPUs: the machine type has {}, the host {cpus}",
            machine.vcpus
        ));
    }
    let usable = memory.saturating_sub(reserved);
    if machine.memory.bytes() > usable {
        let kept = if reserved > 0 {
            format!(" after its reserved_memory of {} MiB", reserved >> 20)
        } else {
            String::new()
        };
        short.push(format!(
            "memory: the machine type needs {} MiB, the host has {} MiB free (with reclaimable cache){kept}",
            machine.memory.mib(),
            usable >> 20
        ));
    }
    if short.is_empty() {
        return Ok(());
    }
    Err(ApiError::quota_exceeded(format!(
        "host {host} lacks capacity for this VM: {}",
        short.join("; ")
    )))
}

/// Checks that `pool` on `host`, with `free` bytes, takes per-VM volumes
/// of `needed` bytes.
///
/// # Errors
/// QuotaExceeded with both figures.
pub fn check_pool(
    host: &Identifier,
    pool: &Identifier,
    free: u64,
    needed: u64,
) -> Result<(), ApiError> {
    if needed <= free {
        return Ok(());
    }
    Err(ApiError::quota_exceeded(format!(
        "host {host} lacks capacity for this VM: pool {pool} space: the overlay and seed need {} MiB, {} MiB free",
        needed.div_ceil(1 << 20),
        free >> 20
    )))
}

/// The class of a failed domain start: QuotaExceeded when QEMU could not
/// get memory or disk space (the host is full now), else `class` (the
/// error table's).
pub fn start_failure_class(message: &str, class: ErrorClass) -> ErrorClass {
    const SHORT_OF: [&str; 4] = [
        "cannot set up guest memory",
        "Cannot allocate memory",
        "No space left on device",
        "Disk quota exceeded",
    ];
    if SHORT_OF.iter().any(|s| message.contains(s)) {
        ErrorClass::QuotaExceeded
    } else {
        class
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::ProvidersConfig;

    fn stat(field: &str, value: u64) -> libvirt_rpc::remote::NodeGetMemoryStats {
        libvirt_rpc::remote::NodeGetMemoryStats {
            field: field.into(),
            value,
        }
    }

    #[test]
    fn page_cache_counts_as_memory_a_vm_can_have() {
        // A host after a big build: little free, much cached.
        let stats = [
            stat("total", 24 << 20),
            stat("free", 369 << 10),
            stat("buffers", 100 << 10),
            stat("cached", 20 << 20),
        ];
        assert_eq!(
            reclaimable_kib(&stats),
            Some((369 << 10) + (100 << 10) + (20 << 20))
        );
        // Without every field: no estimate (free memory alone is read).
        assert_eq!(reclaimable_kib(&stats[..2]), None);
        assert_eq!(
            reclaimable_kib(&[
                stat("free", u64::MAX),
                stat("buffers", 1),
                stat("cached", 0)
            ]),
            None
        );
    }

    fn machine(vcpus: u32, memory: &str) -> MachineType {
        let yaml = format!(
            "providers:\n  - name: e\n    type: kvm2\n    kvm2:\n      ssh: {{user: root, key_file: /k, insecure_ignore_host_key: true}}\n      hosts: [{{name: h, address: 10.0.0.1, bridge: br0, pool: p}}]\n      images:\n        i: {{url: 'http://x/i', sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, format: raw}}\n      machine_types:\n        m: {{vcpus: {vcpus}, memory: {memory}, disk: 1GiB}}\n"
        );
        let config = ProvidersConfig::from_yaml_str(&yaml).unwrap();
        config.providers[0]
            .kvm2()
            .unwrap()
            .machine_types
            .values()
            .next()
            .copied()
            .unwrap()
    }

    #[test]
    fn enough_of_everything_passes() {
        let (h, p) = (
            Identifier::parse("h").unwrap(),
            Identifier::parse("p").unwrap(),
        );
        assert!(check_compute(&h, 2, 2 << 30, 0, &machine(2, "2GiB")).is_ok());
        assert!(check_pool(&h, &p, 2 << 30, 2 << 30).is_ok());
    }

    #[test]
    fn each_shortage_is_named() {
        let (h, p) = (
            Identifier::parse("h1").unwrap(),
            Identifier::parse("pool1").unwrap(),
        );
        let e = check_compute(&h, 2, 1 << 30, 0, &machine(4, "2GiB")).unwrap_err();
        assert_eq!(e.class(), ErrorClass::QuotaExceeded);
        assert_eq!(
            e.message(),
            "host h1 lacks capacity for this VM: vCPUs: the machine type has 4, the host 2; \
             memory: the machine type needs 2048 MiB, the host has 1024 MiB free (with reclaimable cache)"
        );
        let only_memory = check_compute(&h, 2, 1 << 30, 0, &machine(1, "2GiB")).unwrap_err();
        assert!(only_memory.message().contains("memory"), "{only_memory}");
        assert!(!only_memory.message().contains("vCPUs"), "{only_memory}");
        let pool = check_pool(&h, &p, 100 << 20, 200 << 20).unwrap_err();
        assert_eq!(pool.class(), ErrorClass::QuotaExceeded);
        assert_eq!(
            pool.message(),
            "host h1 lacks capacity for this VM: pool pool1 space: the overlay and seed need 200 MiB, 100 MiB free"
        );
    }

    #[test]
    fn reserved_memory_is_kept_from_new_vms() {
        let h = Identifier::parse("h1").unwrap();
        let m = machine(1, "1GiB");
        assert!(check_compute(&h, 2, 3 << 30, 2 << 30, &m).is_ok());
        let e = check_compute(&h, 2, 3 << 30, (2 << 30) + (1 << 20), &m).unwrap_err();
        assert_eq!(e.class(), ErrorClass::QuotaExceeded);
        assert!(
            e.message().contains(
                "1023 MiB free (with reclaimable cache) after its reserved_memory of 2049 MiB"
            ),
            "{e}"
        );
        // More reserved than there is: nothing usable, no underflow.
        assert!(check_compute(&h, 2, 1 << 30, u64::MAX, &m).is_err());
    }

    #[test]
    fn a_start_short_of_memory_is_quota_exceeded() {
        // libvirt 11.3 / QEMU 10 on the sandbox, a 900 GiB guest.
        let real = "internal error: QEMU unexpectedly closed the monitor (vm='zz'): \
            2026-12-02T19:57:13.631935Z qemu-system-x86_64: cannot set up guest memory 'pc.ram': \
            Cannot allocate memory";
        assert_eq!(
            start_failure_class(real, ErrorClass::Transient),
            ErrorClass::QuotaExceeded
        );
        assert_eq!(
            start_failure_class("Cannot get interface MTU on 'nobr0'", ErrorClass::Transient),
            ErrorClass::Transient
        );
    }

    #[test]
    fn node_info_decodes_from_its_wire_form() {
        let mut wire = Vec::new();
        for c in b"x86_64\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0" {
            wire.extend_from_slice(&i32::from(*c).to_be_bytes());
        }
        wire.extend_from_slice(&16_344_824u64.to_be_bytes());
        for v in [2i32, 2445, 1, 1, 2, 1] {
            wire.extend_from_slice(&v.to_be_bytes());
        }
        let info: NodeInfo = libvirt_rpc::proto::xdr::from_bytes(&wire).unwrap();
        assert_eq!(info, NodeInfo { cpus: 2 });
        assert!(libvirt_rpc::proto::xdr::from_bytes::<NodeInfo>(&wire[..20]).is_err());
    }
}

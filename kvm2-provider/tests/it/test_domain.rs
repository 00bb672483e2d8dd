//! The domain tests and benchmarks define without the provider: one
//! [`DomainSpec`] (TCG, BIOS, q35, 1 vCPU, 128 MiB, no fixed MAC) that
//! callers adjust with struct update syntax, and the ownership mark they
//! put in it. Shared by `tests/it` and the benchmarks (by `#[path]`).

use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::{
    BootFirmware, DomainSpec, MachineName, MemoryMib, OwnerMark, Vcpus, disk_path,
};
use provider_api::config::DomainType;
use provider_api::config::values::BridgeName;
use provider_api::{Identifier, OwnerUid};

/// The ownership mark of `entry` for `owner`, made at a fixed time.
pub fn mark(entry: &str, owner: &str) -> OwnerMark {
    OwnerMark::new(
        OwnerUid::parse(owner).unwrap(),
        Identifier::parse(entry).unwrap(),
        Timestamp::from_unix_seconds(1_796_200_000).unwrap(),
    )
}

/// Domain `name` under TCG with BIOS on q35, 1 vCPU and 128 MiB, the
/// `overlay` and `seed` disk files, a NIC on `bridge` with a MAC libvirt
/// picks, and `mark`.
pub fn spec(name: &str, overlay: &str, seed: &str, bridge: &str, mark: OwnerMark) -> DomainSpec {
    DomainSpec {
        domain_type: DomainType::Qemu,
        name: Identifier::parse(name).unwrap(),
        memory: MemoryMib::new(128).unwrap(),
        vcpus: Vcpus::new(1).unwrap(),
        machine: MachineName::parse("q35").unwrap(),
        firmware: BootFirmware::Bios,
        overlay_path: disk_path("overlay path", overlay).unwrap(),
        seed_path: disk_path("seed path", seed).unwrap(),
        bridge: BridgeName::parse(bridge).unwrap(),
        mac: None,
        mark,
    }
}

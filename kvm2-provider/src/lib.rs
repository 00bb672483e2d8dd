//! The kvm2 provider: egress-proxy VMs on libvirt/KVM hosts reached over SSH.
//!
//! This crate owns the per-host connection table (libvirt-rpc over
//! ssh-socket), the base image cache, cloud-init seed ISOs, domain XML, the
//! domain lifecycle (create, get, delete, list-by-tag) and host health
//! checks. It knows libvirt, SSH, HTTP, ISO and XML, and nothing of
//! Kubernetes.
//!
//! [`Kvm2Provider`] implements [`provider_api::Provider`]; [`register`] puts
//! its constructor into the operator's [`provider_api::Registry`].
//! Construction dials nothing. Each operation is its own module:
//!
//! ```text
//!  Kvm2Provider ─ create (one deadline) ─▶ placement (dial cool-down) ─▶ adoption guard
//!       │          ─▶ ImageCache::ensure_by ─▶ seed_iso + vendor_data ─▶ hosts::capacity
//!       │          ─▶ overlay, seed ─▶ domain_xml ─▶ define, start, watch
//!       ├─ delete ─▶ destroy, undefine (NVRAM), per-VM volumes (never the base)
//!       ├─ get / list_by_tag / checker ─▶ get, list, check (address)
//!       └─ HostTable: one shared connection per host; dedicated ones for
//!                     uploads and checks (SSH via ssh-socket, libvirt-rpc)
//!
//!  ImageCache: single flight per (host, key), a task of the cache's ─▶ judge base + marker
//!              ─▶ fill lease (cross-process lock, heartbeat) ─▶ base in use? (base_users)
//!              ─▶ GET ─▶ free space ─▶ upload into the base (dedicated conn) ─▶ verify
//!              ─▶ marker last (the publish) ─▶ release the lease
//! ```
//!
//! The pieces they are built from are pure functions or self-contained
//! streams:
//!
//! ```text
//!  machine type, host, mark ─▶ definition::domain_xml::render ─▶ <domain> XML with the mark
//!  user data + vendor_data  ─▶ definition::seed_iso::build    ─▶ NoCloud ISO bytes (cidata)
//!  image URL + sha256       ─▶ images::ImageSource::open      ─▶ Download: Stream<Bytes>, hashed, capped
//!  entry, key, instance     ─▶ storage::{BaseNames, VmVolumes} ─▶ base / marker / fill lease / overlay / seed
//!  lease bytes, clock       ─▶ images::Lease                  ─▶ live or provably abandoned
//!  volume / domain XML      ─▶ images/base_users.rs           ─▶ backing and disk paths
//!  volume name, backing     ─▶ storage::volume_xml            ─▶ <volume> XML
//!  libvirt dumps, numbers   ─▶ definition::parse_mark, images/image_marker.rs (judge),
//!                              libvirt::state::classify
//!  libvirt-rpc errors       ─▶ libvirt::errors::classify      ─▶ provider error class
//! ```
//!
//! # Layout
//!
//! The source tree is the architecture (ARCHITECTURE.md's code map): one
//! private module per subsystem, each exporting its API from its folder's
//! `mod.rs`, and code reaching another subsystem only through that path
//! (`crate::images::ImageCache`, `crate::storage::PoolOps`):
//!
//! | module        | what it exports to the rest of the crate                          |
//! |---------------|-------------------------------------------------------------------|
//! | `operations`  | [`Kvm2Provider`], [`ProviderOptions`], [`register`]; `get`, `list_by_tag`, `HostChecker` |
//! | `hosts`       | `HostTable`, `Connection`, [`HostOptions`], `capacity`             |
//! | `images`      | [`ImageCache`], [`BaseImage`], [`CacheOptions`], `ImageSource`, [`SourceLimits`], the fill `Lease` |
//! | `storage`     | `PoolOps`, `BaseNames`, `VmVolumes`, `volume_xml`                  |
//! | `definition`  | `domain_xml`, `DomainSpec` and its values, `seed_iso`, `vendor_data`, `OwnerMark` |
//! | `libvirt`     | `observed`, `to_provider_error`, `errors`, `state`, `DomainOps`    |
//! | `address`     | `discover` (invariant 8), `interface_macs`                         |
//!
//! The public surface is the provider, its options and the crate's
//! [`Error`]. The crate's integration tests and benches reach the rest
//! through one hidden module, `__internals`, which is not API.
//!
//! One kind of task is spawned: an image fill, owned by the provider's
//! [`ImageCache`] (aborted when it is dropped) and bounded by the fill
//! budget, so that a Create leaving at its deadline does not cancel a fill
//! other Creates (or its own retry) still need. Every other job runs in its
//! caller's future. Deliberately absent: clock reads in the builders (times
//! are inputs), unbounded waits (every libvirt call has its connection's
//! deadline; Create has its caller's; fills and clean-ups have budgets), and
//! panics on input — every parser returns a typed [`Error`]. Cloud-init user
//! data never reaches a log, span or error.
//!
//! The operator guide is `docs/kvm2-provider.md`.
//!
//! # Example
//!
//! The operator registers the constructor and builds providers from the
//! providers config; a tool builds one directly, with its own budgets.
//! Neither dials anything.
//!
//! ```
//! use std::time::Duration;
//!
//! use kvm2_provider::{Kvm2Provider, ProviderOptions};
//! use provider_api::{Identifier, Provider, ProvidersConfig, Registry};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ProvidersConfig::from_yaml_str(r#"
//! providers:
//!   - name: kvm2-home
//!     type: kvm2
//!     kvm2:
//!       ssh: {user: root, key_file: /etc/kvm2/id_ed25519, known_hosts_file: /etc/kvm2/known_hosts}
//!       hosts: [{name: host1, address: 192.168.10.11, bridge: br0, pool: default}]
//!       images:
//!         debian-13:
//!           url: https://example.org/debian-13.qcow2
//!           sha256: 8c0ad7e35fbca0ad7d6a3ba0d9ac3d8efd5fba8a1c8e7cd9e0a4c6e8f4b3c2a1
//!           format: qcow2
//!       machine_types: {small: {vcpus: 1, memory: 1GiB, disk: 10GiB}}
//! "#)?;
//!
//! // The operator's way: the registry builds every kvm2 entry.
//! let mut registry = Registry::new();
//! kvm2_provider::register(&mut registry)?;
//! let providers = registry.build(&config)?;
//! let name = Identifier::parse("kvm2-home")?;
//! assert!(providers.get(&name).is_some());
//!
//! // A tool's way: one entry, with a shorter Create budget.
//! let entry = &config.providers[0];
//! let mut options = ProviderOptions::default();
//! options.create_budget = Duration::from_secs(5 * 60);
//! let kvm2 = entry.kvm2().ok_or("not a kvm2 entry")?.clone();
//! let provider = Kvm2Provider::with_options(entry.name.clone(), kvm2, options)?;
//! assert_eq!(provider.name(), &name);
//! assert_eq!(provider.image_cache().in_flight(), 0);
//! # Ok(())
//! # }
//! ```

mod address;
mod definition;
mod error;
mod hosts;
mod images;
mod libvirt;
mod operations;
mod storage;
mod timestamp;

pub use error::Error;
pub use hosts::{DEFAULT_CALL_TIMEOUT, HostOptions};
pub use images::{BaseImage, CacheOptions, Fenced, ImageCache, LeaseTiming, SourceLimits};
pub use operations::{Kvm2Provider, ProviderOptions, register};

/// Not API: the crate's internals, for this crate's integration tests
/// (`tests/`) and benches (`benches/`) only. No stability: anything here may
/// change or disappear in any release, semver notwithstanding; other crates
/// must not use it.
///
/// Each module mirrors the subsystem of the same name (everything it
/// exports with `pub`; `pub(crate)` items stay inside the crate), so a test
/// names an internal by the path the crate's own code uses:
/// `crate::images::ImageSource` is `__internals::images::ImageSource`.
#[doc(hidden)]
pub mod __internals {
    /// `crate::address`: a running domain's address.
    pub mod address {
        pub use crate::address::*;
    }
    /// `crate::definition`: domain XML, the ownership mark, the seed ISO.
    pub mod definition {
        pub use crate::definition::*;
    }
    /// `crate::hosts`: the host table, connections, host capacity.
    pub mod hosts {
        pub use crate::hosts::*;
    }
    /// `crate::images`: the base image cache and its pieces.
    pub mod images {
        pub use crate::images::*;
    }
    /// `crate::libvirt`: observed calls, error and state tables.
    pub mod libvirt {
        pub use crate::libvirt::*;
    }
    /// `crate::operations`: the provider and its operations.
    pub mod operations {
        pub use crate::operations::*;
    }
    /// `crate::storage`: volume names and volume XML.
    pub mod storage {
        pub use crate::storage::*;
    }
    pub use crate::timestamp::Timestamp;
}

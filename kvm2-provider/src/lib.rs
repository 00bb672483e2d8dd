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
//!       │          ─▶ image_cache::ensure_by ─▶ seed_iso + vendor_data ─▶ host_capacity
//!       │          ─▶ overlay, seed ─▶ domain_xml ─▶ define, start, watch
//!       ├─ delete ─▶ destroy, undefine (NVRAM), per-VM volumes (never the base)
//!       ├─ get / list_by_tag / checker ─▶ get, list, check (address)
//!       └─ HostTable: one shared connection per host; dedicated ones for
//!                     uploads and checks (SSH via ssh-socket, libvirt-rpc)
//!
//!  image_cache: single flight per (host, key), a task of the cache's ─▶ judge base + marker
//!               ─▶ fill lease (cross-process lock, heartbeat) ─▶ base in use? (base_users)
//!               ─▶ GET ─▶ free space ─▶ upload into the base (dedicated conn) ─▶ verify
//!               ─▶ marker last (the publish) ─▶ release the lease
//! ```
//!
//! The pieces they are built from are pure functions or self-contained
//! streams:
//!
//! ```text
//!  machine type, host, mark ─▶ domain_xml::render ─▶ <domain> XML with the ownership mark
//!  user data + vendor_data  ─▶ seed_iso::build    ─▶ NoCloud ISO bytes (label cidata)
//!  image URL + sha256       ─▶ ImageSource::open  ─▶ Download: Stream<Bytes>, hashed, capped
//!  entry, key, instance     ─▶ volume_names       ─▶ base / marker / fill lease / overlay / seed
//!  lease bytes, clock       ─▶ fill_lease::Lease  ─▶ live or provably abandoned
//!  volume / domain XML      ─▶ base_users         ─▶ backing and disk paths
//!  volume name, backing     ─▶ volume_xml         ─▶ <volume> XML
//!  libvirt dumps, numbers   ─▶ ownership_mark::parse_mark, image_marker::judge, state::classify
//!  libvirt-rpc errors       ─▶ libvirt_errors::classify ─▶ provider error class
//! ```
//!
//! One kind of task is spawned: an image fill, owned by the provider's
//! [`ImageCache`](image_cache::ImageCache) (aborted when it is dropped) and
//! bounded by the fill budget, so that a Create leaving at its deadline does
//! not cancel a fill other Creates (or its own retry) still need. Every other
//! job runs in its caller's future. Deliberately absent: clock reads in the
//! builders (times are inputs), unbounded waits (every libvirt call has its
//! connection's deadline; Create has its caller's; fills and clean-ups have
//! budgets), and panics on input — every parser returns a typed [`Error`].
//! Cloud-init user data never reaches a log, span or error.
//!
//! The operator guide is `docs/kvm2-provider.md`.
//!
//! ```
//! use kvm2_provider::volume_names::BaseNames;
//! use provider_api::Identifier;
//! use provider_api::config::ImageFormat;
//!
//! let entry = Identifier::parse("kvm2-home").unwrap();
//! let key = Identifier::parse("debian-13").unwrap();
//! let names = BaseNames::new(&entry, &key, ImageFormat::Qcow2);
//! assert_eq!(names.base(), "base-kvm2-home.debian-13.qcow2");
//! ```

// The tree reads as the architecture (ARCHITECTURE.md's code map): one
// private folder per subsystem. The modules tests, benchmarks and the
// operator reach are re-exported here under their own names; the rest stay
// inside the crate (reachable as `crate::name` through the private `use`s).
mod address;
mod definition;
mod error;
mod hosts;
mod images;
mod libvirt;
mod operations;
mod storage;
pub mod timestamp;

pub use address::nic_macs;
pub use definition::{domain_xml, ownership_mark, seed_iso, vendor_data};
pub use hosts::{connection, host_capacity, host_table};
pub use images::{
    base_users, fill_lease, image_cache, image_marker, image_source, pool_space, single_flight,
};
pub use libvirt::{libvirt_errors, observe, state};
pub use operations::{check, get, list, provider};
pub use storage::{volume_names, volume_xml};

use images::fenced_read;
use libvirt::domains;
use operations::{create, delete};
use storage::volumes;

pub use error::Error;
pub use provider::{Kvm2Provider, ProviderOptions, register};

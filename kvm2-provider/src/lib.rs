//! The kvm2 provider: egress-proxy VMs on libvirt/KVM hosts reached over SSH.
//!
//! This crate will own the per-host connection table (libvirt-rpc over
//! ssh-socket), the base image cache, cloud-init seed ISOs, domain XML, the
//! domain lifecycle (create, get, delete, list-by-tag) and host health
//! checks. It knows libvirt, SSH, HTTP, ISO and XML, and nothing of
//! Kubernetes.
//!
//! What exists today are the pieces that need no libvirt connection, each a
//! pure function or a self-contained stream:
//!
//! ```text
//!  config + request ──▶ domain_xml::render ──▶ <domain> XML (with ownership mark)
//!                   ──▶ seed_iso::build    ──▶ NoCloud ISO bytes (cidata)
//!  image URL+sha256 ──▶ image_source::open ──▶ Stream<Bytes> (hash-checked, capped)
//!  entry, key, name ──▶ volume_names       ──▶ base / marker / upload / overlay / seed
//!  libvirt dumps    ──▶ ownership_mark::parse_mark, state::classify
//! ```
//!
//! Not here yet: connections, the image cache protocol (upload, atomic
//! publish, marker), and the lifecycle; see `docs/kvm2-provider.md`.

pub mod domain_xml;
mod error;
pub mod image_marker;
pub mod image_source;
pub mod ownership_mark;
pub mod seed_iso;
pub mod state;
pub mod timestamp;
pub mod vendor_data;
pub mod volume_names;
pub mod volume_xml;

pub use error::Error;

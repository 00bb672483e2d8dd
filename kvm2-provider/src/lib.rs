//! The kvm2 provider: egress-proxy VMs on libvirt/KVM hosts reached over SSH.
//!
//! This crate will own the per-host connection table (libvirt-rpc over
//! ssh-socket), the base image cache, cloud-init seed ISOs, domain XML, the
//! domain lifecycle (create, get, delete, list-by-tag) and host health
//! checks. It knows libvirt, SSH, HTTP, ISO and XML, and nothing of
//! Kubernetes.
//!
//! What exists today: the connection layer ([`host_table`], [`connection`])
//! and the pieces of Create/Get/Delete that need no connection, each a pure
//! function or a self-contained stream:
//!
//! ```text
//!  machine type, host, mark ─▶ domain_xml::render ─▶ <domain> XML with the ownership mark
//!  user data + vendor_data  ─▶ seed_iso::build    ─▶ NoCloud ISO bytes (label cidata)
//!  image URL + sha256       ─▶ ImageSource::open  ─▶ Download: Stream<Bytes>, hashed, capped
//!  entry, key, instance     ─▶ volume_names       ─▶ base / marker / upload / overlay / seed
//!  volume name, backing     ─▶ volume_xml         ─▶ <volume> XML
//!  libvirt dumps, numbers   ─▶ ownership_mark::parse_mark, image_marker::judge, state::classify
//!  libvirt-rpc errors       ─▶ libvirt_errors::classify ─▶ provider error class
//!  host name                ─▶ HostTable::shared / dedicated ─▶ Connection (SSH + libvirt)
//! ```
//!
//! Deliberately absent: I/O outside the download and the connection layer,
//! clock reads in the builders (times are inputs), and panics on input —
//! every parser returns a typed [`Error`].
//!
//! Not here yet: the image cache protocol (upload, atomic publish, marker
//! write) and the lifecycle; see `docs/kvm2-provider.md`.
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

pub mod address;
pub mod check;
pub mod connection;
mod create;
mod delete;
pub mod domain_xml;
mod error;
pub mod get;
pub mod host_table;
pub mod image_cache;
pub mod image_marker;
pub mod image_source;
pub mod libvirt_errors;
pub mod list;
pub mod observe;
pub mod ownership_mark;
pub mod pool_space;
pub mod provider;
pub mod seed_iso;
pub mod single_flight;
pub mod state;
pub mod timestamp;
pub mod vendor_data;
pub mod volume_names;
pub mod volume_xml;
mod volumes;

pub use error::Error;
pub use provider::{Kvm2Provider, ProviderOptions, register};

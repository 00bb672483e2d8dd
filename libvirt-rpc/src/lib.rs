//! Pure-Rust async client for libvirt's remote wire protocol.
//!
//! ```text
//!   your tasks ──call()──┐   (any number at once; cheap Clone handles)
//!   Upload / Download ───┤
//!   Subscription<T> ◀────┤   (events: typed, raw or lifecycle; bounded queues)
//!                        ▼
//!              ┌────────────────────┐  bounded command queue (backpressure)
//!              │  Client (handle)   │─────────────┐
//!              └────────────────────┘             ▼
//!              ┌──────────────────────────────────────────────┐
//!              │ connection task (one per link, owns the IO)  │
//!              │  reader: frames → reply by serial (oneshot), │
//!              │          stream queues, event queues, PONGs  │
//!              │  writer: coalesced packets, PINGs, aborts    │
//!              │  keepalive clock, link-death broadcast       │
//!              └──────────────────────────────────────────────┘
//!                        │ AsyncRead + AsyncWrite (unix socket, TCP, SSH channel)
//!                        ▼
//!                     libvirtd
//!   proto/ (sans-IO): XDR codec, framing, headers, error payload, keepalive state
//! ```
//!
//! What it does: connects over any `AsyncRead + AsyncWrite + Send` byte
//! stream, runs libvirt's handshake (auth NONE or polkit, keepalive probe,
//! connect-open), multiplexes calls by serial, answers and sends keepalive
//! PINGs, detects dead links, runs upload/download streams that abort on
//! the wire when their source or sink fails, and delivers events — every
//! domain, storage pool, network, host device and secret event kind libvirt
//! 11 emits, typed, or any kind as raw bytes ([`events`]). Every procedure of
//! libvirt 11.3's remote and QEMU programs that is a plain call has a typed
//! method, generated from libvirt's protocol files ([`procedures`] lists
//! all 462 and what each became; [`remote`] holds their types);
//! [`Client::call`] reaches anything else with caller-supplied types.
//!
//! It parses connection URIs ([`Uri`]: `qemu:///system`,
//! `qemu+ssh://user@host/system?keyfile=...`, `test:///default`, ...),
//! telling the name to open and, for local URIs, which daemon socket to
//! dial (modular `virtqemud-sock` or monolithic `libvirt-sock`, system or
//! per-user), by libvirt's own rules; [`Client::connect_uri`] connects by
//! one (unix socket, TCP, TLS with feature `tls`, SSH with feature `ssh`).
//!
//! With feature `tls` it opens TLS connections to libvirtd's TLS port
//! (`Client::connect_tls`: rustls with the ring provider, the daemon's
//! certificate checked against your CA, your client certificate, and the
//! confirmation byte libvirtd sends after accepting it; `TlsCredentials`,
//! `PkiPaths` for libvirt's default file locations).
//!
//! What it deliberately does not do: run external commands for a
//! connection (`+ext`, SSH's `command=`; any `AsyncRead + AsyncWrite`
//! stream can be given to [`Client::connect`]), start daemons,
//! SASL authentication (a clear [`Error::UnsupportedAuth`]; polkit is
//! supported, see [`AuthType`]), file-descriptor passing, sparse streams.
//! A dead [`Client`] stays dead; [`Reconnecting`] (opt-in) redials with
//! backoff and registers subscriptions again, telling them about the gap
//! ([`Resumed::Gap`]).
//!
//! Policies, in short: dropping a call abandons only that call; deadlines
//! are per call ([`Config::call_timeout`], [`Client::with_call_timeout`]);
//! dropping a stream aborts it; link death (IO error, EOF, keepalive
//! timeout, [`Client::close`]) fails every pending call, stream and
//! subscription with [`Error::Disconnected`]. See [`Client`] and [`stream`]
//! for the details, including what libvirtd 11 does with an upload finished
//! before its declared length.
//!
//! # Layers and what is public
//! The crate root holds the client ([`Client`], [`Config`], the typed
//! procedures, flags, [`stream`], [`events`]) and the errors ([`Error`],
//! [`LibvirtError`] with [`ErrorCode`], [`ErrorDomain`] and
//! [`ErrorLevel`]). [`proto`], the sans-IO layer beneath, is public too —
//! the XDR codec that [`Client::call`]'s types implement (see
//! [`xdr_struct!`]), and the framing for code that plays the daemon's side
//! — except its keepalive state machine; [`proto`] says why. The codec
//! covers XDR as libvirt's `.x` files use it: structs ([`xdr_struct!`]),
//! discriminated unions ([`xdr_union!`]; typed parameters are
//! [`TypedParam`] and [`TypedParamValue`]), `hyper`, `float`/`double`,
//! variable and fixed opaques and arrays, optional data, and each field's
//! maximum (`REMOTE_*_MAX`, [`proto::limits`]) checked both ways before
//! anything is allocated; [`proto::xdr`] has the table. [`Config`]'s
//! settings are set only through methods that clamp them, so no value can
//! make the connection panic or stall. [`bytes`] is re-exported because
//! its types appear in the codec's traits.
//!
//! # Depending on it
//! The crates.io name `libvirt-rpc` belongs to an unrelated crate: depend
//! on this one by `git` (or `path`), as the README shows. It needs a tokio
//! runtime (current-thread or multi-thread) and enables only the tokio
//! features it uses (`rt`, `net`, `io-util`, `time`, `sync`, `macros`).
//! Minimum Rust: 1.85.
//!
//! # Features
//! - `testing` (off by default): `testing`, a scripted fake daemon for
//!   testing your code without libvirtd.
//! - `tls` (off by default): `Client::connect_tls`, `TlsCredentials`,
//!   `TlsStream`, `PkiPaths`, and the `Error::Tls*` variants. Adds rustls
//!   (ring provider, no aws-lc) through tokio-rustls.
//! - `ssh` (off by default): SSH URIs in [`Client::connect_uri`]
//!   (`qemu+ssh://`, `+libssh`, `+libssh2`), `ConnectOptions::ssh_key` and
//!   `ssh_jump`, `Error::SshSetup`/`Error::Ssh`, and the `ssh_socket`
//!   re-export. Adds the `ssh-socket` crate (russh with ring); needs Rust
//!   1.89.
//!
//! # Examples
//! `examples/` holds user tasks, each documented at its top and run
//! against a real daemon by the crate's tests: `list_domains`,
//! `upload_volume` (with progress), `watch_events` (lifecycle),
//! `connect_tls` (feature `tls`), `connect_ssh` (feature `ssh`: a
//! `qemu+ssh://` URI, optionally through a bastion).
//! `cargo run --example list_domains -- qemu:///system`.
//!
//! # Performance
//! `cargo xtask bench libvirt-rpc` measures this crate against libvirt's own
//! C client in the same run, against one daemon on a unix socket, and prints
//! the ratios. Measured on the 2-core CI machine (medians of interleaved
//! rounds): 256 MiB upload 1.05–1.22× `virsh vol-upload` (256 KiB packets,
//! as virsh sends). The daemon is the limit: an ideal client that writes
//! prebuilt packets in one `write_all` reaches about 1,340 MiB/s, of which
//! this crate gets 0.88× and virsh 0.75×, so no client can be more than
//! about 1.33× virsh on that daemon (the same bench measures the ceiling);
//! call rate
//! 1.10–1.19× python3-libvirt sequentially and 1.04–1.19× with 16 callers on
//! one connection, using less than half the C client's CPU per call
//! (20 µs vs 46 µs, Python included) — libvirtd's own CPU is the limit; peak
//! memory growth during the upload 4–5 MiB (the stream budget, see
//! [`stream`]). Event delivery, a burst of 10,000 lifecycle events received
//! by a subscription vs python3-libvirt's default event loop, each in a
//! process of its own, against the sandbox daemon: 1.45× the events/s
//! (median of 7 rounds, per-round 1.27–3.00, on the 2-core machine at load
//! 11–12, where the daemon generating the burst is the limit: both keep up,
//! the last event typically under a millisecond after the last call) at
//! 11 µs of receiver CPU per event against 57 µs (Python included).
//!
//! # Example
//! ```no_run
//! use libvirt_rpc::{Client, Config, OpenFlags, ListDomainsFlags, StorageVolStreamFlags};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let socket = tokio::net::UnixStream::connect("/run/libvirt/libvirt-sock").await?;
//! let client = Client::connect(socket, "qemu:///system", OpenFlags::empty(), Config::default()).await?;
//! for dom in client.connect_list_all_domains(ListDomainsFlags::empty()).await? {
//!     println!("{} (id {})", dom.name, dom.id);
//! }
//! let pool = client.storage_pool_lookup_by_name("default").await?;
//! let vol = client.storage_vol_lookup_by_name(&pool, "disk.qcow2").await?;
//! let file = tokio::fs::File::open("disk.qcow2").await?;
//! let len = file.metadata().await?.len();
//! client.storage_vol_upload(&vol, 0, len, StorageVolStreamFlags::empty(), file).await?;
//! client.close().await;
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod auth;
mod client;
mod config;
mod connect_uri;
mod connection;
mod domain_state;
mod error;
mod error_code;
mod error_domain;
pub mod events;
mod flags;
mod generated;
mod host;
pub mod proto;
/// Every procedure of libvirt's remote, QEMU and LXC programs (libvirt
/// 11.3.0) and what this crate makes of it: a generated [`Client`] method
/// or stream, an event, or unsupported and why. For methods, what the
/// sweep tests got calling them with sample arguments: every one on
/// libvirt's test driver, and a chosen set of read-only ones on
/// `qemu:///system` with a running QEMU domain ("answered", or the
/// daemon's error code). Stream methods return the open stream ([`Upload`],
/// [`Download`] or [`Duplex`]) beside the opening reply's body.
///
/// The methods are generated by `cargo xtask codegen libvirt-rpc` from
/// `remote_protocol.x`, `qemu_protocol.x` and `lxc_protocol.x` and from
/// libvirt's API descriptions (for the flag types); a CI check keeps the
/// committed code equal to a fresh run. The rules: borrowed parameters;
/// `need_results` and list counts are not parameters; a reply of one field
/// is that field; `flags` are the bitflags type libvirt's API description
/// names, [`NoFlags`] where it says they are unused. Every method fails
/// with [`Error::Libvirt`] when the daemon refuses the call,
/// [`Error::Disconnected`] when the link dies and [`Error::Timeout`] after
/// the call deadline; dropping its future abandons only that call. The
/// numbers are in [`proc_num`].
///
#[doc = include_str!("generated/status.md")]
pub mod procedures {}
mod reconnect;
#[cfg(test)]
mod remote_tests;
#[cfg(feature = "ssh")]
mod ssh;
mod ssh_route;
pub mod stream;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
mod tls;
mod uri;

pub use auth::AuthType;
pub use client::Client;
pub use config::Config;
pub use connect_uri::ConnectOptions;
pub use domain_state::{
    BlockedReason, CrashedReason, DomainEventId, DomainState, DrvFeature, NoStateReason,
    PausedReason, PmSuspendedReason, RunningReason, ShutdownReason, ShutoffReason, StateReason,
};
pub use error::{DisconnectReason, Error, LibvirtError, Result, SocketProblem};
pub use error_code::ErrorCode;
pub use error_domain::{ErrorDomain, ErrorLevel};
pub use events::{Event, EventTarget, LifecycleEvent, RawEvent, Subscription};
pub use flags::*;
pub use generated::params;
pub use generated::proc_num;
/// Every type of libvirt's remote, QEMU and LXC protocols: the
/// procedures' argument and reply structs (`DomainGetStateRet`, ...), event
/// messages and what they hold, generated from the `.x` files.
pub use generated::types as remote;
pub use proto::typed_param::{TypedParam, TypedParamValue};
pub use proto::types::{Domain, Network, NodeDevice, Secret, StoragePool, StorageVol, Uuid};
pub use reconnect::{ReconnectPolicy, Reconnecting, Resubscribed, Resumed};
pub use remote::{
    DomainInfo, DomainInterface, DomainIpAddr, DomainStateInfo, StoragePoolInfo, StorageVolInfo,
};
pub use stream::{Download, DownloadReader, Duplex, Upload, UploadWriter};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use tls::{PkiFile, PkiPaths, TlsCredentials, TlsStage, TlsStream};
pub use uri::{SYSTEM_SOCKET, SocketMode, Transport, Uri, UriError};

/// The `bytes` crate (version 1), whose `BytesMut` and `Bytes` appear in
/// [`proto::xdr`]'s traits: implement [`proto::xdr::Encode`] by hand
/// without a dependency of your own. [`xdr_struct!`]'s expansion names it
/// through this path.
pub use bytes;
/// (Feature `ssh`.) The SSH client SSH URIs are dialled with: its
/// [`KeySource`](ssh_socket::KeySource) and
/// [`JumpHost`](ssh_socket::JumpHost) go to
/// [`ConnectOptions`], its errors come inside [`Error::Ssh`].
#[cfg(feature = "ssh")]
#[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
pub use ssh_socket;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

//! A scripted fake libvirt daemon, to test code that uses [`Client`]
//! without libvirtd (feature `testing`).
//!
//! ```text
//!   your code ──▶ Client ══ in-memory link (real wire format) ══▶ FakeDaemon task
//!                                                                  │ Script: per procedure,
//!   your test ──────────── emit events, drop the link ──────────▶ │ a Reply or a function
//!             ◀─────────── calls(), uploads() ────────────────────┘ of the Call
//! ```
//!
//! The fake speaks libvirt's real wire format through this crate's own
//! codec ([`crate::proto`]): the client under test runs its real
//! handshake, keepalive, serial matching, streams and event routing.
//!
//! - [`Script`]: what the daemon answers. Per procedure a fixed [`Reply`]
//!   — a typed value ([`Reply::ok`]), a libvirt error ([`Reply::error`]),
//!   a download or upload stream, silence, a dropped link — or a function
//!   of the [`Call`]. The handshake, keepalive and event registrations are
//!   answered by default; any other procedure fails as libvirtd fails one
//!   it does not know.
//! - [`FakeDaemon`]: the running daemon: the calls and uploads it
//!   received, events to push ([`FakeDaemon::emit_event`] for any typed
//!   kind, [`FakeDaemon::emit_lifecycle`],
//!   [`FakeDaemon::emit`]), raw bytes to send, the link to drop. Dropping
//!   it stops the daemon.
//! - [`DaemonEnd`]: the daemon's end of a link, packet by packet, for
//!   tests that need what no script expresses (the crate's own tests use
//!   it for keepalive floods and stream packets overtaking replies).
//!
//! What it does not do: model libvirt's objects (a domain you define does
//! not show up in a later listing unless your script says so — write that
//! state in a [`Script::reply_with`] function), check arguments you do not
//! check, or pass file descriptors.
//!
//! # Example
//! ```
//! use libvirt_rpc::remote::ConnectListAllDomainsRet;
//! use libvirt_rpc::testing::{Reply, Script};
//! use libvirt_rpc::{Config, Domain, ErrorCode, ErrorDomain, ListDomainsFlags, proc_num};
//!
//! /// The code under test: the names of the running domains.
//! async fn running(client: &libvirt_rpc::Client) -> libvirt_rpc::Result<Vec<String>> {
//!     let doms = client.connect_list_all_domains(ListDomainsFlags::ACTIVE).await?;
//!     Ok(doms.into_iter().map(|d| d.name).collect())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let web = Domain { name: "web".into(), uuid: [1; 16], id: 3 };
//! let (client, daemon) = Script::new()
//!     .reply(
//!         proc_num::CONNECT_LIST_ALL_DOMAINS,
//!         Reply::ok(&ConnectListAllDomainsRet { domains: vec![web], ret: 1 }),
//!     )
//!     .reply(
//!         proc_num::DOMAIN_LOOKUP_BY_NAME,
//!         Reply::error(ErrorCode::NoDomain, ErrorDomain::Qemu, "Domain not found"),
//!     )
//!     .connect(Config::default())
//!     .await?;
//!
//! assert_eq!(running(&client).await?, ["web"]);
//! let missing = client.domain_lookup_by_name("db").await.unwrap_err();
//! assert!(missing.is_not_found());
//! // What the code under test asked for, flags included.
//! let calls = daemon.calls();
//! let list = calls.iter().find(|c| c.procedure() == proc_num::CONNECT_LIST_ALL_DOMAINS);
//! assert_eq!(list.unwrap().args::<(i32, u32)>()?, (1, ListDomainsFlags::ACTIVE.bits()));
//! # Ok(())
//! # }
//! ```
//!
//! [`Client`]: crate::Client

mod daemon_end;
mod fake_daemon;
mod reply;
mod samples;
mod script;

pub use crate::generated::sweep::sweep;
pub use daemon_end::{DEFAULT_PIPE_CAPACITY, DaemonEnd};
pub use fake_daemon::{FakeDaemon, ReceivedUpload, UploadOutcome};
pub use reply::{Call, Reply};
pub use samples::Samples;
pub use script::{FAKE_URI, Script};

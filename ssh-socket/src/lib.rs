//! Reach a remote unix socket (libvirt's, by default) over SSH.
//!
//! [`dial`] connects to an SSH server with russh, verifies its host key
//! against an OpenSSH known_hosts file, authenticates with a private key
//! read from disk on every dial, and opens a `direct-streamlocal` channel
//! (what `ssh -L local.sock:remote.sock` uses) to a unix socket on that
//! host. The result, [`SshSocket`], is an `AsyncRead + AsyncWrite` byte
//! stream to hand to a protocol client.
//!
//! ```text
//!   protocol client ──▶ SshSocket ──(channel)──▶ russh session task ──TCP──▶ sshd ──▶ remote.sock
//!        ▲                 │  ▲ pump task drains                 ▲
//!        └── io errors ◀───┘  └ incoming data        supervisor task: watchdog, teardown,
//!            on close/death                          TCP kill switch (shutdown + RST)
//! ```
//!
//! What it guarantees:
//! - **Typed dial errors by stage** ([`Error`], [`Stage`]), with
//!   [`Error::is_permanent`]: auth, host key and key file errors are
//!   permanent — stop retrying them.
//! - **Teardown never blocks**: [`SshSocket::close`], [`Closer::close`] and
//!   `Drop` return at once and wake every blocked reader and writer with an
//!   error, even when russh is stuck flushing to a vanished peer or a writer
//!   waits for SSH window credit that will never come. The connection's
//!   tasks end within about half a second (a polite disconnect of at most
//!   250 ms, then a TCP reset).
//! - **Dead links are detected**: keepalives are always on; a server silent
//!   for [`Keepalive::dead_after`] (15 s by default) ends the socket.
//!
//! What it deliberately does not do: reconnect (the caller owns retries and
//! pooling), know anything about libvirt, accept host certificates
//! (`@cert-authority` trust is refused with its own error), or use an SSH
//! agent.
//!
//! # Example
//! Forward a remote libvirt socket and hand it to a protocol client (here
//! a stand-in that writes a request and reads a reply):
//!
//! ```no_run
//! use ssh_socket::{dial, HostKeyPolicy, SshConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = SshConfig::new(
//!     "hypervisor-1.example.org",
//!     "root",
//!     "/etc/kvm2/ssh/id_ed25519",
//!     HostKeyPolicy::KnownHosts("/etc/kvm2/ssh/known_hosts".into()),
//! ); // remote socket: /var/run/libvirt/libvirt-sock
//! let mut socket = match dial(&config).await {
//!     Ok(socket) => socket,
//!     Err(e) if e.is_permanent() => return Err(e.into()), // fix config; do not retry
//!     Err(e) => return Err(e.into()),                     // retry later with backoff
//! };
//! let closer = socket.closer(); // close from anywhere, never blocks
//!
//! // Any client that speaks over `AsyncRead + AsyncWrite` works, e.g.
//! // `libvirt_rpc::Client::connect(socket, ...)`.
//! socket.write_all(b"request").await?;
//! let mut reply = [0u8; 16];
//! let n = socket.read(&mut reply).await?;
//! println!("{} bytes back", n);
//! closer.close();
//! # Ok(())
//! # }
//! ```

mod config;
mod dial;
mod error;
mod handler;
mod known_hosts;
mod link;
mod private_key;
mod socket;
mod supervisor;
mod tcp;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, HostKeyPolicy, Keepalive, LIBVIRT_SOCKET, Passphrase, SshConfig,
};
pub use dial::{dial, dial_over};
pub use error::{Error, Stage};
pub use link::Closer;
pub use socket::SshSocket;

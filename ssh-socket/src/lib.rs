//! Reach a remote unix socket (libvirt's, by default) over SSH.
//!
//! [`dial`] connects to an SSH server with russh (directly, or through
//! jump hosts: [`JumpHost`]), verifies its host key against an OpenSSH
//! known_hosts file, authenticates with a private key read from disk on
//! every dial, held in memory or kept by an ssh-agent ([`KeySource`]), and
//! opens a `direct-streamlocal` channel
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
//!   tasks end within 500 ms (a polite disconnect of at most 250 ms, the
//!   server's FIN awaited for at most 250 ms, else a TCP reset).
//! - **Dead links are detected**: keepalives are always on; a server silent
//!   for [`Keepalive::dead_after`] (15 s by default) ends the socket.
//!
//! Host keys are checked against an OpenSSH known_hosts file, host
//! certificates through its `@cert-authority` lines.
//!
//! A user's OpenSSH client config (`~/.ssh/config`) is read only when asked
//! for: [`UserConfig`] turns a host alias into the [`SshConfig`] `ssh
//! alias` would dial (`HostName`, `User`, `Port`, `IdentityFile`,
//! `ProxyJump`, `UserKnownHostsFile`, `Include`).
//!
//! What it deliberately does not do: reconnect (the caller owns retries and
//! pooling) or know anything about libvirt.
//!
//! # Example
//! Forward a remote unix socket and talk over it (any protocol client over
//! `AsyncRead + AsyncWrite` takes the socket the same way; the workspace's
//! `libvirt-rpc` does, see its `connect_ssh` example):
//!
//! ```no_run
//! use ssh_socket::{dial, HostKeyPolicy, SshConfig};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = SshConfig::new(
//!     "hypervisor-1.example.org",
//!     "root",
//!     "/etc/kvm2/ssh/id_ed25519", // re-read on every dial
//!     HostKeyPolicy::KnownHosts("/etc/kvm2/ssh/known_hosts".into()),
//!     "/var/run/libvirt/libvirt-sock", // the unix socket to reach
//! ); // port 22, 10 s timeout
//! let mut socket = match dial(&config).await {
//!     Ok(socket) => socket,
//!     // Auth, host key and key file errors: fix the config, do not retry.
//!     Err(e) if e.is_permanent() => return Err(e.into()),
//!     // Network, handshake, channel, timeout: retry later with backoff.
//!     Err(e) => return Err(e.into()),
//! };
//! let ssh = socket.closer(); // closes from anywhere, never blocks
//!
//! // A protocol task owns the socket...
//! let session = tokio::spawn(async move {
//!     socket.write_all(b"hello").await?;
//!     let mut reply = [0u8; 5];
//!     socket.read_exact(&mut reply).await?;
//!     Ok::<_, std::io::Error>(reply)
//! });
//! // ...and either side can end it: closing the SSH side fails the task's
//! // pending reads and writes at once.
//! tokio::select! {
//!     reason = ssh.closed() => println!("SSH link ended: {reason}"),
//!     reply = session => println!("{:?}", reply?),
//! }
//! ssh.close();
//! # Ok(())
//! # }
//! ```
//!
//! # Depending on it
//! Not on crates.io yet: depend on the repository by `git` (or `path`), as
//! the README shows. Minimum Rust: 1.89 (russh 0.65's). It enables only
//! the tokio features it uses.

mod config;
mod dial;
mod error;
mod files;
mod handler;
mod known_hosts;
mod link;
mod private_key;
mod socket;
mod supervisor;
mod tcp;
mod user_config;

pub use config::{
    DEFAULT_CONNECT_TIMEOUT, HostKeyPolicy, JumpHost, Keepalive, KeySource, KeyText, Passphrase,
    SshConfig,
};
pub use dial::{dial, dial_over};
pub use error::{Error, SshError, Stage};
pub use link::Closer;
pub use socket::SshSocket;
pub use user_config::{HostSettings, UserConfig};

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    fn send_sync_static<T: Send + Sync + 'static>() {}

    #[test]
    fn public_types_are_send_sync_static() {
        send_sync_static::<super::SshSocket>();
        send_sync_static::<super::Closer>();
        send_sync_static::<super::Error>();
        send_sync_static::<super::SshConfig>();
    }
}

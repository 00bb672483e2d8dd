//! One libvirt connection to one host: a libvirt-rpc [`Client`] over an
//! ssh-socket channel, dialled within a budget, closed without waiting on
//! the network.
//!
//! The close order is invariant 1: the SSH side is closed *first*,
//! because [`Closer::close`] never blocks and wakes every reader and writer
//! (a bulk upload stuck on a vanished host included); only then is the
//! libvirt client told to stop, with its own bound.

use std::time::Duration;

use libvirt_rpc::{Client, Config as RpcConfig, OpenFlags};
use provider_api::{Error as ApiError, ErrorClass, Identifier};
use ssh_socket::{Closer, SshConfig};

use crate::libvirt::to_provider_error;

/// Longest wait for the libvirt client's task after the SSH side is closed.
const CLIENT_CLOSE_BOUND: Duration = Duration::from_millis(500);

/// Everything needed to dial one host.
#[derive(Debug, Clone)]
pub struct DialTarget {
    /// The host's name in the config (for messages).
    pub host: Identifier,
    /// SSH settings; the key and known_hosts files are read on every dial.
    pub ssh: SshConfig,
    /// The libvirt URI to open (`qemu:///system`).
    pub uri: String,
    /// libvirt-rpc settings (call timeout, keepalive, stream sizes).
    pub rpc: RpcConfig,
    /// Bound on the whole dial: TCP, SSH handshake and auth, channel, libvirt
    /// handshake and open.
    pub budget: Duration,
}

/// A live (or dead) libvirt connection to one host.
///
/// Dropping it closes the SSH side at once; [`close`](Self::close) also waits
/// (boundedly) for the libvirt client to stop.
#[derive(Debug)]
pub struct Connection {
    host: Identifier,
    client: Client,
    ssh: Closer,
}

impl Connection {
    /// Dials `target`.
    ///
    /// # Errors
    /// A provider error: Permanent for SSH authentication, host-key and key
    /// file failures (retrying cannot help) and for libvirt refusals the
    /// [error table](crate::libvirt::errors) calls permanent; Transient for
    /// network failures, timeouts and the budget running out.
    ///
    /// # Cancel safety
    /// Cancel safe: a half-made connection is dropped, which closes it.
    pub async fn dial(target: &DialTarget) -> Result<Self, ApiError> {
        let host = &target.host;
        let attempt = async {
            let socket = ssh_socket::dial(&target.ssh).await.map_err(|e| {
                let class = if e.is_permanent() {
                    ErrorClass::Permanent
                } else {
                    ErrorClass::Transient
                };
                ApiError::wrap(
                    class,
                    format!(
                        "host {host}: SSH to {}:{} failed",
                        target.ssh.host, target.ssh.port
                    ),
                    e,
                )
            })?;
            let ssh = socket.closer();
            let client =
                Client::connect(socket, &target.uri, OpenFlags::empty(), target.rpc.clone())
                    .await
                    .map_err(|e| {
                        ssh.close();
                        to_provider_error(format!("host {host}: open {}", target.uri), e)
                    })?;
            Ok(Connection {
                host: host.clone(),
                client,
                ssh,
            })
        };
        match tokio::time::timeout(target.budget, attempt).await {
            Ok(result) => result,
            Err(_) => Err(ApiError::transient(format!(
                "host {host}: no libvirt connection within {:?}",
                target.budget
            ))),
        }
    }

    /// The host this connection reaches.
    pub fn host(&self) -> &Identifier {
        &self.host
    }

    /// The libvirt client (cheap to clone; calls carry their own deadline).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// True once either side is dead: every call would fail.
    pub fn is_dead(&self) -> bool {
        self.client.is_closed() || self.ssh.is_closed()
    }

    /// Closes the connection: SSH first (never blocks), then the client,
    /// waiting at most 500 ms for it.
    ///
    /// # Cancel safety
    /// Cancel safe: the SSH side is closed before the first await.
    pub async fn close(&self) {
        self.ssh.close();
        let _ = tokio::time::timeout(CLIENT_CLOSE_BOUND, self.client.close()).await;
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Never blocks; the client's task ends when its socket does.
        self.ssh.close();
    }
}

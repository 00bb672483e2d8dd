//! The per-host connection table: one shared libvirt connection per host,
//! redialled when dead, and dedicated connections on request.
//!
//! - [`HostTable::new`] does not dial.
//! - [`HostTable::shared`] returns the host's shared connection, dialling it
//!   when there is none or it died. Concurrent callers on a cold host wait
//!   for one dial instead of starting one each; the wait and the dial are
//!   bounded by the dial budget.
//! - [`HostTable::dedicated`] dials a connection of its own for work that
//!   must not poison the shared one (image uploads, health checks); the
//!   caller closes it.
//!
//! Credentials are re-read on every dial (ssh-socket reads the key and
//! known_hosts files each time), so a rotated Secret takes effect at the
//! next dial.

use std::sync::Arc;
use std::time::Duration;

use libvirt_rpc::Config as RpcConfig;
use provider_api::config::Kvm2Config;
use provider_api::{Error as ApiError, Identifier};
use ssh_socket::{HostKeyPolicy, JumpHost, SshConfig};
use tokio::sync::Mutex;

use super::connection::{Connection, DialTarget};

/// Default deadline of one libvirt call.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// How the provider reaches its hosts, beyond what the providers config
/// says.
#[derive(Debug, Clone)]
pub struct HostOptions {
    /// libvirt's unix socket for hosts whose config entry names no
    /// `socket` (default [`libvirt_rpc::SYSTEM_SOCKET`]). A host with its
    /// own `socket` in the config uses that.
    pub remote_socket: String,
    /// The libvirt URI to open (default `qemu:///system`).
    pub uri: String,
    /// Bound on one dial, and on waiting for another caller's dial.
    pub dial_budget: Duration,
    /// libvirt-rpc settings, including the per-call deadline (default 30 s:
    /// every libvirt call has a budget; an image upload sets its own on its
    /// dedicated connection).
    pub rpc: RpcConfig,
}

impl Default for HostOptions {
    fn default() -> Self {
        Self {
            remote_socket: libvirt_rpc::SYSTEM_SOCKET.to_owned(),
            uri: "qemu:///system".to_owned(),
            dial_budget: Duration::from_secs(20),
            rpc: RpcConfig::default().call_timeout(DEFAULT_CALL_TIMEOUT),
        }
    }
}

struct Slot {
    target: DialTarget,
    shared: Mutex<Option<Arc<Connection>>>,
}

/// The hosts of one provider entry and their connections: one
/// [`shared`](Self::shared) connection per host, redialled when dead, and
/// [`dedicated`](Self::dedicated) ones on request. Dials nothing until
/// asked.
pub struct HostTable {
    slots: Vec<Slot>,
}

impl HostTable {
    /// A table for every host of `config`. Dials nothing.
    ///
    /// # Errors
    /// Permanent when host keys are to be checked but no known_hosts file is
    /// configured (the config validation already refuses that; this is the
    /// provider not falling back to trusting any key).
    pub fn new(config: &Kvm2Config, options: &HostOptions) -> Result<Self, ApiError> {
        let host_keys = match (
            &config.ssh.known_hosts_file,
            config.ssh.insecure_ignore_host_key,
        ) {
            (_, true) => HostKeyPolicy::insecure_ignore_host_key(),
            (Some(file), false) => HostKeyPolicy::KnownHosts(file.as_path().to_owned()),
            (None, false) => {
                return Err(ApiError::permanent(
                    "kvm2.ssh.known_hosts_file is required unless insecure_ignore_host_key is set",
                ));
            }
        };
        let slots = config
            .hosts
            .iter()
            .map(|host| {
                let socket = match &host.socket {
                    Some(socket) => socket.as_path().display().to_string(),
                    None => options.remote_socket.clone(),
                };
                let mut ssh = SshConfig::new(
                    host.address.to_string(),
                    config.ssh.user.as_str(),
                    config.ssh.key_file.as_path(),
                    host_keys.clone(),
                    socket,
                )
                .with_port(host.port)
                .with_connect_timeout(options.dial_budget);
                for jump in &host.jump {
                    let user = jump.user.as_ref().unwrap_or(&config.ssh.user);
                    ssh = ssh.with_jump(
                        JumpHost::new(
                            jump.address.to_string(),
                            user.as_str(),
                            config.ssh.key_file.as_path(),
                            host_keys.clone(),
                        )
                        .with_port(jump.port),
                    );
                }
                Slot {
                    target: DialTarget {
                        host: host.name.clone(),
                        ssh,
                        uri: options.uri.clone(),
                        rpc: options.rpc.clone(),
                        budget: options.dial_budget,
                    },
                    shared: Mutex::new(None),
                }
            })
            .collect();
        Ok(Self { slots })
    }

    /// The configured hosts, in config order.
    pub fn hosts(&self) -> impl Iterator<Item = &Identifier> {
        self.slots.iter().map(|s| &s.target.host)
    }

    fn slot(&self, host: &Identifier) -> Result<&Slot, ApiError> {
        self.slots
            .iter()
            .find(|s| &s.target.host == host)
            .ok_or_else(|| {
                ApiError::permanent(format!("host {host} is not in this provider's config"))
            })
    }

    /// The host's shared connection, dialled if there is none or it died.
    ///
    /// # Errors
    /// Permanent for an unknown host and for SSH auth / host-key failures;
    /// otherwise as [`Connection::dial`], or Transient when another caller's
    /// dial did not finish within the budget.
    ///
    /// # Cancel safety
    /// Cancel safe: a dial cancelled half-way leaves the slot empty, and the
    /// next caller dials again.
    pub async fn shared(&self, host: &Identifier) -> Result<Arc<Connection>, ApiError> {
        let slot = self.slot(host)?;
        let budget = slot.target.budget;
        let mut current = tokio::time::timeout(budget, slot.shared.lock())
            .await
            .map_err(|_| {
                ApiError::transient(format!(
                    "host {host}: waited {budget:?} for another caller's dial"
                ))
            })?;
        if let Some(conn) = current.as_ref() {
            if !conn.is_dead() {
                return Ok(conn.clone());
            }
            tracing::debug!(%host, "shared libvirt connection is dead; redialling");
        }
        // Drop (and so close) a dead connection before dialling anew.
        *current = None;
        let conn = Arc::new(Connection::dial(&slot.target).await?);
        *current = Some(conn.clone());
        Ok(conn)
    }

    /// A new connection for the caller alone (uploads, health checks). The
    /// caller should [`close`](Connection::close) it; dropping it also closes
    /// the SSH side.
    ///
    /// # Errors
    /// As [`shared`](Self::shared).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn dedicated(&self, host: &Identifier) -> Result<Connection, ApiError> {
        Connection::dial(&self.slot(host)?.target).await
    }
}

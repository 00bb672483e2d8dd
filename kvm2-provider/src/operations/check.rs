//! Host health checks: the provider's [`Checker`].
//!
//! Per host, concurrently, within the caller's deadline:
//!
//! ```text
//!  HostTable::dedicated(host) ── SSH + libvirt open on a connection of its own
//!     │ connect_get_lib_version
//!     │ close (SSH first; bounded)
//!     ▼
//!  TargetStatus { reachable, latency (dial + call), version "11.3.0", reason }
//! ```
//!
//! The check never touches the shared connections, so it is never stuck
//! behind (or disturbs) instance operations. A host not done by the deadline
//! is reported [`CheckReason::Timeout`]: its future is dropped, which closes
//! the SSH side of whatever it had opened. No task is spawned.
//!
//! Reasons: the SSH error of a failed dial decides between
//! [`AuthFailed`](CheckReason::AuthFailed) (key refused or unusable),
//! [`HostKeyRejected`](CheckReason::HostKeyRejected),
//! [`ConnectFailed`](CheckReason::ConnectFailed) (DNS, TCP, handshake) and
//! [`Timeout`](CheckReason::Timeout); a libvirt failure after SSH succeeded
//! is [`DaemonError`](CheckReason::DaemonError).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use provider_api::error::chain;
use provider_api::{CheckReason, Checker, Error as ApiError, Identifier, TargetStatus};

use crate::hosts::HostTable;
use crate::libvirt::observed;
use libvirt_rpc::proc_num;

/// The kvm2 provider's [`Checker`]: checks every host of one provider entry.
pub struct HostChecker {
    hosts: Arc<HostTable>,
}

impl HostChecker {
    /// A checker for the hosts of `hosts`. Dials nothing.
    pub fn new(hosts: Arc<HostTable>) -> Self {
        Self { hosts }
    }
}

#[async_trait]
impl Checker for HostChecker {
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus> {
        check_hosts(&self.hosts, timeout).await
    }
}

/// Checks every host of `hosts` concurrently and returns one status per
/// host, in config order, within `timeout` (plus scheduling slack).
///
/// # Cancel safety
/// Cancel safe: dropping the future drops every connection it opened, which
/// closes their SSH side at once; nothing is spawned.
pub async fn check_hosts(hosts: &HostTable, timeout: Duration) -> Vec<TargetStatus> {
    let deadline = tokio::time::Instant::now() + timeout;
    futures::future::join_all(hosts.hosts().map(|host| async move {
        match tokio::time::timeout_at(deadline, probe(hosts, host)).await {
            Ok(status) => status,
            Err(_) => TargetStatus::unreachable(
                host.clone(),
                CheckReason::Timeout,
                format!("no answer within {timeout:?}"),
            ),
        }
    }))
    .await
}

async fn probe(hosts: &HostTable, host: &Identifier) -> TargetStatus {
    let started = Instant::now();
    let conn = match hosts.dedicated(host).await {
        Ok(conn) => conn,
        Err(e) => {
            return TargetStatus::unreachable(host.clone(), dial_reason(&e), chain(&e));
        }
    };
    let version = observed(
        host,
        proc_num::CONNECT_GET_LIB_VERSION,
        conn.client().connect_get_lib_version(),
    )
    .await;
    let latency = started.elapsed();
    conn.close().await;
    match version {
        Ok(v) => TargetStatus::reachable(host.clone(), latency, Some(version_text(v))),
        Err(e) => {
            let reason = if e.is_timeout() {
                CheckReason::Timeout
            } else {
                CheckReason::DaemonError
            };
            TargetStatus::unreachable(host.clone(), reason, format!("libvirt: {e}"))
        }
    }
}

/// The reason for a failed [`HostTable::dedicated`] dial, from the error's
/// source: an SSH error by kind, a libvirt error (the open failed) as a
/// daemon error, and no source — the dial budget ran out — as a timeout.
fn dial_reason(error: &ApiError) -> CheckReason {
    let Some(source) = std::error::Error::source(error) else {
        return CheckReason::Timeout;
    };
    if let Some(ssh) = source.downcast_ref::<ssh_socket::Error>() {
        return ssh_reason(ssh);
    }
    if let Some(rpc) = source.downcast_ref::<libvirt_rpc::Error>() {
        return if rpc.is_timeout() {
            CheckReason::Timeout
        } else {
            CheckReason::DaemonError
        };
    }
    CheckReason::Other
}

fn ssh_reason(error: &ssh_socket::Error) -> CheckReason {
    use ssh_socket::Error as E;
    if error.is_host_key() || matches!(error, E::KnownHostsUnreadable { .. }) {
        return CheckReason::HostKeyRejected;
    }
    match error {
        E::AuthRejected { .. }
        | E::AuthInterrupted { .. }
        | E::KeyFileUnreadable { .. }
        | E::KeyEncrypted { .. }
        | E::KeyInvalid { .. } => CheckReason::AuthFailed,
        E::Resolve { .. } | E::TcpConnect { .. } | E::Handshake { .. } => {
            CheckReason::ConnectFailed
        }
        // SSH works but the libvirt socket could not be reached.
        E::ChannelOpenRefused { .. } | E::ChannelOpen { .. } => CheckReason::DaemonError,
        E::Timeout { .. } | E::PeerSilent { .. } => CheckReason::Timeout,
        _ => CheckReason::Other,
    }
}

/// `major * 1_000_000 + minor * 1_000 + micro` as `major.minor.micro`.
fn version_text(v: u64) -> String {
    format!("{}.{}.{}", v / 1_000_000, (v / 1_000) % 1_000, v % 1_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_numbers_read_as_text() {
        assert_eq!(version_text(11_003_000), "11.3.0");
        assert_eq!(version_text(9_010_002), "9.10.2");
    }

    #[test]
    fn dial_errors_map_to_reasons() {
        let budget = ApiError::transient("host h: no libvirt connection within 1s");
        assert_eq!(dial_reason(&budget), CheckReason::Timeout);
        let tcp = ssh_socket::Error::TcpConnect {
            host: "h".into(),
            port: 22,
            source: std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        };
        let wrapped = ApiError::wrap(provider_api::ErrorClass::Transient, "ssh", tcp);
        assert_eq!(dial_reason(&wrapped), CheckReason::ConnectFailed);
        // Each layer once: the provider's context, ssh-socket's, the OS's.
        assert_eq!(
            chain(&wrapped),
            "ssh: TCP connect to h:22 failed: connection refused"
        );
    }

    #[test]
    fn a_printed_libvirt_chain_does_not_repeat_itself() {
        let lost = libvirt_rpc::Error::Disconnected(libvirt_rpc::DisconnectReason::Eof);
        let e = crate::libvirt::to_provider_error("host h: state of ep-1", lost)
            .context("get kvm2://e/h/ep-1");
        assert_eq!(
            chain(&e),
            "get kvm2://e/h/ep-1: host h: state of ep-1: libvirt connection lost: \
             daemon closed the connection"
        );
    }
}

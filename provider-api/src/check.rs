//! The health-check capability: [`Checker`], [`TargetStatus`], [`CheckReason`].

use std::time::Duration;

use async_trait::async_trait;

use crate::ident::Identifier;

/// Why a target is, or is not, reachable. Stable names (see
/// [`as_str`](Self::as_str)) suit condition reasons and metrics labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CheckReason {
    /// The target answered: the only reason with `reachable == true`.
    Reachable,
    /// The target did not answer before the check's deadline.
    Timeout,
    /// The transport could not be opened (DNS, TCP refused or unreachable).
    ConnectFailed,
    /// The transport opened but authentication was refused (SSH key).
    AuthFailed,
    /// The target's host key did not match the known hosts (or none known).
    HostKeyRejected,
    /// Connected and authenticated, but the daemon behind it (libvirtd)
    /// failed or answered something unexpected.
    DaemonError,
    /// Anything else; the status message says what.
    Other,
}

impl CheckReason {
    /// `Reachable`, `Timeout`, `ConnectFailed`, `AuthFailed`,
    /// `HostKeyRejected`, `DaemonError`, `Other`.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckReason::Reachable => "Reachable",
            CheckReason::Timeout => "Timeout",
            CheckReason::ConnectFailed => "ConnectFailed",
            CheckReason::AuthFailed => "AuthFailed",
            CheckReason::HostKeyRejected => "HostKeyRejected",
            CheckReason::DaemonError => "DaemonError",
            CheckReason::Other => "Other",
        }
    }
}

/// The result of checking one target (host). Built with
/// [`TargetStatus::reachable`] or [`TargetStatus::unreachable`], which keep
/// `reachable` and `reason` consistent (non-exhaustive).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TargetStatus {
    /// The target's name (the host name in the provider's config).
    pub target: Identifier,
    /// Whether the target answered; `true` exactly when `reason` is
    /// [`CheckReason::Reachable`].
    pub reachable: bool,
    /// Round-trip time of the check, when the target answered.
    pub latency: Option<Duration>,
    /// The version the target reported (e.g. libvirt `11.3.0`), if any.
    pub version: Option<String>,
    /// Why.
    pub reason: CheckReason,
    /// A short human-readable detail (no secrets); empty when reachable.
    pub message: String,
}

impl TargetStatus {
    /// A reachable target.
    pub fn reachable(target: Identifier, latency: Duration, version: Option<String>) -> Self {
        TargetStatus {
            target,
            reachable: true,
            latency: Some(latency),
            version,
            reason: CheckReason::Reachable,
            message: String::new(),
        }
    }

    /// An unreachable target. `reason` must not be
    /// [`Reachable`](CheckReason::Reachable) (it is replaced by
    /// [`Other`](CheckReason::Other) if it is).
    pub fn unreachable(
        target: Identifier,
        reason: CheckReason,
        message: impl Into<String>,
    ) -> Self {
        let reason = match reason {
            CheckReason::Reachable => CheckReason::Other,
            r => r,
        };
        TargetStatus {
            target,
            reachable: false,
            latency: None,
            version: None,
            reason,
            message: message.into(),
        }
    }
}

/// Checks the targets (hosts) behind a provider.
///
/// Reached through [`Provider::checker`](crate::Provider::checker); the
/// decorators in this crate forward it.
#[async_trait]
pub trait Checker: Send + Sync {
    /// Checks every target the provider is configured with, concurrently,
    /// and returns one status per target, in config order.
    ///
    /// Contract:
    /// * returns within `timeout` (plus scheduling slack); a target not
    ///   done by then is reported [`CheckReason::Timeout`], not awaited;
    /// * uses connections of its own, so a check never disturbs (or is
    ///   stuck behind) instance operations, and closes them before returning;
    /// * never fails as a whole: every failure is a per-target status.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the check; implementations must release
    /// every connection they opened for it (no task outlives the future).
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_keep_reachable_consistent() {
        let t = Identifier::parse("host1").unwrap();
        let ok =
            TargetStatus::reachable(t.clone(), Duration::from_millis(5), Some("11.3.0".into()));
        assert!(ok.reachable && ok.reason == CheckReason::Reachable);
        let bad = TargetStatus::unreachable(t.clone(), CheckReason::Reachable, "x");
        assert!(!bad.reachable);
        assert_eq!(bad.reason, CheckReason::Other);
        let to = TargetStatus::unreachable(t, CheckReason::Timeout, "deadline");
        assert_eq!(to.reason.as_str(), "Timeout");
    }
}

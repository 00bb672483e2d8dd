//! [`Error`]: the one error type of this crate.
//!
//! Only parsing at the crate's edges fails; the decision functions are total
//! (a bad input becomes a condition in the status they return, not an
//! error).

/// A value from outside (a timestamp, a probe target, a discovery query, a
/// cluster identity) that this crate refuses.
///
/// Messages quote at most the first 64 characters of the refused text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Not an RFC 3339 date-time between years 0000 and 9999.
    #[error("not an RFC 3339 date-time: {text:?}")]
    InvalidTimestamp {
        /// The refused text (truncated).
        text: String,
    },
    /// Not a `host:port` a CONNECT request may name.
    #[error("not a probe target (host:port, host a DNS name or IP address): {text:?}")]
    InvalidProbeTarget {
        /// The refused text (truncated).
        text: String,
    },
    /// A discovery query with an unknown, repeated or malformed parameter.
    #[error("bad discovery query: {reason}")]
    InvalidQuery {
        /// What is wrong, naming the parameter.
        reason: String,
    },
    /// A cluster identity that cannot be a provider tag value.
    #[error("not a cluster identity: {rule}")]
    InvalidClusterIdentity {
        /// The rule it breaks.
        rule: &'static str,
    },
}

/// Truncates refused text for an error message.
pub(crate) fn quoted(text: &str) -> String {
    text.chars().take(64).collect()
}

//! [`Reason`]: the vocabulary of condition reasons, and the
//! [`ReasonCategory`] each belongs to.
//!
//! The categories keep apart what a user must tell apart: the instance
//! failed, the input (spec, Secret, config) is wrong, the provider is out of
//! capacity, or the provider cannot be reached.

/// A condition reason: a stable CamelCase word (see [`as_str`](Self::as_str)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Reason {
    // Progress.
    /// No instance yet; the create call is being made.
    Creating,
    /// The instance exists and has no address yet.
    Provisioning,
    /// The instance runs and has an address.
    Running,
    /// A failed instance is being deleted to be made again.
    Replacing,
    /// The Proxy is being deleted; its instance with it.
    Deleting,
    /// The Proxy names an existing proxy (`spec.existing`): nothing is
    /// made; it is probed and published.
    Existing,

    // Instance failure.
    /// The provider reports the instance failed or stopped.
    InstanceFailed,
    /// The instance vanished (Get answered NotFound); it is made again.
    InstanceGone,
    /// A running instance has reported no address for longer than the grace
    /// period.
    AddressLost,
    /// Replacements within the window reached the cap; waiting.
    ReplaceLimitReached,
    /// The instance's host has not answered for longer than the host-loss
    /// grace; a new instance is made on another host.
    HostLost,

    // Input error.
    /// A spec field does not parse.
    InvalidSpec,
    /// The spec was edited after the instance was made.
    SpecImmutable,
    /// The cloud-init Secret, or its key, does not exist.
    SecretMissing,
    /// The cloud-init user data is not UTF-8.
    SecretInvalid,
    /// The cloud-init user data is larger than allowed.
    SecretTooLarge,
    /// The provider entry is not in the providers config (or the recorded
    /// provider ID names another).
    UnknownProvider,
    /// The provider refused the request for good (Permanent): the spec or
    /// the provider config must change. Retried slowly, and when the
    /// provider's health recovers.
    ProviderRejected,

    // Quota wait.
    /// The provider has no capacity now (QuotaExceeded); retried after a
    /// long wait.
    QuotaWait,

    // Provider unavailable.
    /// The provider failed transiently several times in a row.
    ProviderUnavailable,

    // Health (the `Healthy` condition).
    /// Enough consecutive CONNECT probes passed.
    ProbeSucceeded,
    /// The proxy refused the CONNECT (403: its ACL denied it).
    ProbeDenied,
    /// The proxy answered the CONNECT with another status (503: target
    /// unreachable, ...).
    ProbeRejected,
    /// The proxy did not answer in time.
    ProbeTimeout,
    /// The proxy's port could not be reached (refused, unreachable).
    ProbeUnreachable,
    /// The proxy answered something that is not HTTP, or closed.
    ProbeBadResponse,
    /// Not enough probes yet for a verdict, or nothing to probe.
    AwaitingProbes,
    /// The proxy is not `Running` (being created, replaced or deleted,
    /// failed, or without an address): no verdict, and an earlier one is
    /// dropped.
    NotServing,
    /// The instance was replaced: the old instance's verdict is dropped and
    /// the new one is probed from scratch.
    InstanceReplaced,
    /// The proxy's address changed: the verdict starts over.
    AddressChanged,
    /// The instance was unhealthy for longer than
    /// `--replace-unhealthy-after`; it is replaced (within the cap).
    Unhealthy,
}

/// What kind of situation a [`Reason`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReasonCategory {
    /// Normal progress or the steady state.
    Progress,
    /// The instance failed, vanished or lost its address.
    InstanceFailure,
    /// The spec, the Secret or the provider config must change.
    InputError,
    /// The provider lacks capacity; retried after a long wait.
    QuotaWait,
    /// The provider could not be reached; retried with backoff.
    ProviderUnavailable,
    /// A CONNECT probe verdict.
    Health,
}

impl Reason {
    /// The stable name, as written to conditions and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Creating => "Creating",
            Reason::Provisioning => "Provisioning",
            Reason::Running => "Running",
            Reason::Replacing => "Replacing",
            Reason::Deleting => "Deleting",
            Reason::Existing => "Existing",
            Reason::InstanceFailed => "InstanceFailed",
            Reason::InstanceGone => "InstanceGone",
            Reason::AddressLost => "AddressLost",
            Reason::ReplaceLimitReached => "ReplaceLimitReached",
            Reason::HostLost => "HostLost",
            Reason::InvalidSpec => "InvalidSpec",
            Reason::SpecImmutable => "SpecImmutable",
            Reason::SecretMissing => "SecretMissing",
            Reason::SecretInvalid => "SecretInvalid",
            Reason::SecretTooLarge => "SecretTooLarge",
            Reason::UnknownProvider => "UnknownProvider",
            Reason::ProviderRejected => "ProviderRejected",
            Reason::QuotaWait => "QuotaWait",
            Reason::ProviderUnavailable => "ProviderUnavailable",
            Reason::ProbeSucceeded => "ProbeSucceeded",
            Reason::ProbeDenied => "ProbeDenied",
            Reason::ProbeRejected => "ProbeRejected",
            Reason::ProbeTimeout => "ProbeTimeout",
            Reason::ProbeUnreachable => "ProbeUnreachable",
            Reason::ProbeBadResponse => "ProbeBadResponse",
            Reason::AwaitingProbes => "AwaitingProbes",
            Reason::NotServing => "NotServing",
            Reason::InstanceReplaced => "InstanceReplaced",
            Reason::AddressChanged => "AddressChanged",
            Reason::Unhealthy => "Unhealthy",
        }
    }

    /// The category it belongs to.
    pub fn category(self) -> ReasonCategory {
        match self {
            Reason::Creating
            | Reason::Provisioning
            | Reason::Running
            | Reason::Replacing
            | Reason::Deleting
            | Reason::Existing => ReasonCategory::Progress,
            Reason::InstanceFailed
            | Reason::InstanceGone
            | Reason::AddressLost
            | Reason::Unhealthy
            | Reason::HostLost
            | Reason::ReplaceLimitReached => ReasonCategory::InstanceFailure,
            Reason::InvalidSpec
            | Reason::SpecImmutable
            | Reason::SecretMissing
            | Reason::SecretInvalid
            | Reason::SecretTooLarge
            | Reason::UnknownProvider
            | Reason::ProviderRejected => ReasonCategory::InputError,
            Reason::QuotaWait => ReasonCategory::QuotaWait,
            Reason::ProviderUnavailable => ReasonCategory::ProviderUnavailable,
            Reason::ProbeSucceeded
            | Reason::ProbeDenied
            | Reason::ProbeRejected
            | Reason::ProbeTimeout
            | Reason::ProbeUnreachable
            | Reason::ProbeBadResponse
            | Reason::AwaitingProbes
            | Reason::NotServing
            | Reason::InstanceReplaced
            | Reason::AddressChanged => ReasonCategory::Health,
        }
    }

    /// Every reason, in declaration order (for docs, CRD enums and tests).
    pub const ALL: [Reason; 31] = [
        Reason::Creating,
        Reason::Provisioning,
        Reason::Running,
        Reason::Replacing,
        Reason::Deleting,
        Reason::Existing,
        Reason::InstanceFailed,
        Reason::InstanceGone,
        Reason::AddressLost,
        Reason::ReplaceLimitReached,
        Reason::HostLost,
        Reason::InvalidSpec,
        Reason::SpecImmutable,
        Reason::SecretMissing,
        Reason::SecretInvalid,
        Reason::SecretTooLarge,
        Reason::UnknownProvider,
        Reason::ProviderRejected,
        Reason::QuotaWait,
        Reason::ProviderUnavailable,
        Reason::ProbeSucceeded,
        Reason::ProbeDenied,
        Reason::ProbeRejected,
        Reason::ProbeTimeout,
        Reason::ProbeUnreachable,
        Reason::ProbeBadResponse,
        Reason::AwaitingProbes,
        Reason::NotServing,
        Reason::InstanceReplaced,
        Reason::AddressChanged,
        Reason::Unhealthy,
    ];

    /// The reason named `s`, if any.
    pub fn parse(s: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique_camel_case_and_parse_back() {
        let names: HashSet<_> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), Reason::ALL.len());
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(s.starts_with(|c: char| c.is_ascii_uppercase()), "{s}");
            assert!(s.chars().all(|c| c.is_ascii_alphanumeric()), "{s}");
            assert_eq!(Reason::parse(s), Some(r));
        }
        assert_eq!(Reason::parse("running"), None);
    }

    #[test]
    fn the_four_trouble_kinds_are_kept_apart() {
        use ReasonCategory::*;
        assert_eq!(Reason::InstanceFailed.category(), InstanceFailure);
        assert_eq!(Reason::ReplaceLimitReached.category(), InstanceFailure);
        assert_eq!(Reason::SecretMissing.category(), InputError);
        assert_eq!(Reason::ProviderRejected.category(), InputError);
        assert_eq!(Reason::QuotaWait.category(), QuotaWait);
        assert_eq!(Reason::ProviderUnavailable.category(), ProviderUnavailable);
        assert_eq!(Reason::Running.category(), Progress);
        assert_eq!(Reason::ProbeDenied.category(), Health);
    }
}

//! [`Event`]: what the reconciler asks the operator to record as a
//! Kubernetes Event on the `Proxy`.

/// Normal or Warning, as Kubernetes Events have it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Something expected happened.
    Normal,
    /// Something needs attention.
    Warning,
}

/// Why an event is recorded: a stable CamelCase word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventReason {
    /// An instance was created.
    Created,
    /// A failed instance is being deleted to be made again.
    Replacing,
    /// An instance unhealthy for longer than `--replace-unhealthy-after` is
    /// being deleted to be made again.
    ReplacingUnhealthy,
    /// The instance vanished; it is made again.
    InstanceGone,
    /// The instance's host has not answered past the host-loss grace; a
    /// new instance is made on another host.
    HostLost,
    /// Replacements reached the cap; the proxy waits.
    ReplaceLimitReached,
    /// A running instance lost its address past the grace period.
    AddressLost,
    /// A spec field does not parse (as the condition reason).
    InvalidSpec,
    /// The cloud-init Secret, or its key, does not exist.
    SecretMissing,
    /// The cloud-init user data is not UTF-8.
    SecretInvalid,
    /// The cloud-init user data is larger than allowed.
    SecretTooLarge,
    /// The provider entry is not in the providers config.
    UnknownProvider,
    /// Any other input error (the condition's reason says which).
    InvalidInput,
    /// The spec was edited after the instance was made; the edit is ignored.
    SpecImmutable,
    /// The provider has no capacity now.
    QuotaWait,
    /// The provider refused for good (Permanent).
    ProviderRejected,
    /// The provider failed transiently several times in a row.
    ProviderUnavailable,
    /// The instance was deleted with the Proxy.
    Deleted,
    /// The instance cannot be deleted: its provider entry is unknown, or the
    /// provider refuses (Permanent). The finalizer stays until the abandon
    /// annotation is set.
    DeleteBlocked,
    /// The finalizer was released without deleting the instance (abandon
    /// annotation).
    Abandoned,
}

impl EventReason {
    /// The Event of an input error whose condition reason is `reason`: the
    /// same word, so an Event names the one thing to fix.
    pub fn of_input_error(reason: crate::reason::Reason) -> Self {
        use crate::reason::Reason;
        match reason {
            Reason::InvalidSpec => EventReason::InvalidSpec,
            Reason::SecretMissing => EventReason::SecretMissing,
            Reason::SecretInvalid => EventReason::SecretInvalid,
            Reason::SecretTooLarge => EventReason::SecretTooLarge,
            Reason::UnknownProvider => EventReason::UnknownProvider,
            _ => EventReason::InvalidInput,
        }
    }

    /// The stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::Created => "Created",
            EventReason::Replacing => "Replacing",
            EventReason::ReplacingUnhealthy => "ReplacingUnhealthy",
            EventReason::InstanceGone => "InstanceGone",
            EventReason::HostLost => "HostLost",
            EventReason::ReplaceLimitReached => "ReplaceLimitReached",
            EventReason::AddressLost => "AddressLost",
            EventReason::InvalidSpec => "InvalidSpec",
            EventReason::SecretMissing => "SecretMissing",
            EventReason::SecretInvalid => "SecretInvalid",
            EventReason::SecretTooLarge => "SecretTooLarge",
            EventReason::UnknownProvider => "UnknownProvider",
            EventReason::InvalidInput => "InvalidInput",
            EventReason::SpecImmutable => "SpecImmutable",
            EventReason::QuotaWait => "QuotaWait",
            EventReason::ProviderRejected => "ProviderRejected",
            EventReason::ProviderUnavailable => "ProviderUnavailable",
            EventReason::Deleted => "Deleted",
            EventReason::DeleteBlocked => "DeleteBlocked",
            EventReason::Abandoned => "Abandoned",
        }
    }
}

/// One event to record on the `Proxy` (the message carries no secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Normal or Warning.
    pub kind: EventKind,
    /// Why.
    pub reason: EventReason,
    /// Details for humans.
    pub message: String,
}

impl Event {
    /// A Normal event.
    pub fn normal(reason: EventReason, message: impl Into<String>) -> Self {
        Event {
            kind: EventKind::Normal,
            reason,
            message: message.into(),
        }
    }

    /// A Warning event.
    pub fn warning(reason: EventReason, message: impl Into<String>) -> Self {
        Event {
            kind: EventKind::Warning,
            reason,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Reason;

    #[test]
    fn each_input_error_has_an_event_reason_of_its_own() {
        let inputs = [
            Reason::InvalidSpec,
            Reason::SecretMissing,
            Reason::SecretInvalid,
            Reason::SecretTooLarge,
            Reason::UnknownProvider,
        ];
        let names: std::collections::BTreeSet<&str> = inputs
            .iter()
            .map(|r| EventReason::of_input_error(*r).as_str())
            .collect();
        assert_eq!(names.len(), inputs.len(), "{names:?}");
        for r in inputs {
            assert_eq!(EventReason::of_input_error(r).as_str(), r.as_str());
        }
    }
}

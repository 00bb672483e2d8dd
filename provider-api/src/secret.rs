//! [`SecretString`]: text that must never reach a log, a span, a metrics
//! label or an error message.

use std::fmt;

/// Text that must never be printed: cloud-init user data, passwords, tokens.
///
/// `Debug` and `Display` both print `[redacted]`, so a struct holding one can
/// derive `Debug` safely. The only way to read the text is
/// [`expose_secret`](Self::expose_secret), which makes each read greppable.
/// It implements neither `Serialize` nor `Deserialize`, and equality is not
/// offered (comparing secrets is rarely what a caller means). The memory is
/// not zeroed on drop: the goal is keeping secrets out of output.
///
/// ```
/// use provider_api::SecretString;
/// let s = SecretString::new("#cloud-config\npassword: hunter2\n");
/// assert_eq!(format!("{s}"), "[redacted]");
/// assert_eq!(format!("{s:?}"), "[redacted]");
/// assert!(s.expose_secret().contains("hunter2"));
/// ```
#[derive(Clone, Default)]
pub struct SecretString(String);

/// What `Debug` and `Display` print instead of a secret.
pub const REDACTED: &str = "[redacted]";

impl SecretString {
    /// Wraps `secret`.
    pub fn new(secret: impl Into<String>) -> Self {
        SecretString(secret.into())
    }

    /// The secret text. Do not log it, put it in a span or an error.
    pub fn expose_secret(&self) -> &str {
        &self.0
    }

    /// Length in bytes (safe to log: it reveals the size only).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the secret is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl From<String> for SecretString {
    fn from(s: String) -> Self {
        SecretString(s)
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug)]
    #[allow(dead_code)] // the field is read through Debug only
    struct Holder {
        user_data: SecretString,
    }

    #[test]
    fn debug_and_display_redact() {
        let s = SecretString::new("hunter2");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(format!("{s:#?}"), "[redacted]");
        assert_eq!(format!("{s:>20}"), "[redacted]");
    }

    #[test]
    fn derived_debug_of_holder_redacts() {
        let h = Holder {
            user_data: SecretString::new("hunter2"),
        };
        let d = format!("{h:?} {h:#?}");
        assert!(!d.contains("hunter2"), "{d}");
        assert!(d.contains("[redacted]"));
    }

    #[test]
    fn expose_len_and_clone() {
        let s = SecretString::from("abc".to_owned());
        let c = s.clone();
        assert_eq!(c.expose_secret(), "abc");
        assert_eq!(s.len(), 3);
        assert!(!s.is_empty());
        assert!(SecretString::default().is_empty());
    }

    proptest! {
        #[test]
        fn never_printed(secret in ".{1,64}") {
            let s = SecretString::new(secret.clone());
            prop_assert_eq!(format!("{s:?}"), REDACTED);
            prop_assert_eq!(format!("{s}"), REDACTED);
            prop_assert_eq!(s.expose_secret(), secret.as_str());
        }
    }
}

//! [`UserDataRead`]: what the operator found when it read the cloud-init
//! Secret, and its check into a [`SecretString`].
//!
//! The operator reads the Secret named by
//! [`Reconciler::secret_to_read`](crate::Reconciler::secret_to_read) and
//! hands the outcome over as is; the checks (present, UTF-8, not too large)
//! live here so they are the same everywhere and table-tested.

use std::fmt;

use provider_api::SecretString;

use crate::reason::Reason;

/// The outcome of reading the cloud-init Secret. `Debug` never prints the
/// data.
#[derive(Clone, Default)]
pub enum UserDataRead {
    /// The spec names no Secret: no user data.
    #[default]
    NotRequested,
    /// The Secret does not exist.
    SecretNotFound,
    /// The Secret exists without the key.
    KeyNotFound,
    /// The key's value, as stored (not yet checked).
    Found(Vec<u8>),
    /// Reading failed (API error); retried with backoff. The message names
    /// the failure, not the data.
    Unavailable(String),
}

impl fmt::Debug for UserDataRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UserDataRead::NotRequested => f.write_str("NotRequested"),
            UserDataRead::SecretNotFound => f.write_str("SecretNotFound"),
            UserDataRead::KeyNotFound => f.write_str("KeyNotFound"),
            UserDataRead::Found(b) => write!(f, "Found([redacted; {} bytes])", b.len()),
            UserDataRead::Unavailable(m) => f.debug_tuple("Unavailable").field(m).finish(),
        }
    }
}

/// Why user data cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserDataProblem {
    /// An input error (`SecretMissing`, `SecretInvalid`, `SecretTooLarge`)
    /// with a message for the condition.
    Input(Reason, String),
    /// Reading failed; retry.
    Unavailable(String),
}

impl UserDataRead {
    /// Checks the outcome: `Ok(None)` without user data, `Ok(Some)` with
    /// valid user data of at most `max_bytes`.
    ///
    /// # Errors
    /// [`UserDataProblem::Input`] when the Secret or key is missing, the
    /// data is not UTF-8 or larger than `max_bytes`;
    /// [`UserDataProblem::Unavailable`] when it could not be read. Messages
    /// give sizes, never content.
    pub fn check(
        &self,
        secret: &str,
        key: &str,
        max_bytes: usize,
    ) -> Result<Option<SecretString>, UserDataProblem> {
        let input = |reason, message: String| Err(UserDataProblem::Input(reason, message));
        match self {
            UserDataRead::NotRequested => Ok(None),
            UserDataRead::SecretNotFound => input(
                Reason::SecretMissing,
                format!("Secret {secret:?} (spec.cloudInit) does not exist"),
            ),
            UserDataRead::KeyNotFound => input(
                Reason::SecretMissing,
                format!("Secret {secret:?} has no key {key:?} (spec.cloudInit.key)"),
            ),
            UserDataRead::Found(bytes) if bytes.len() > max_bytes => input(
                Reason::SecretTooLarge,
                format!(
                    "Secret {secret:?} key {key:?} holds {} bytes; at most {max_bytes} are allowed",
                    bytes.len()
                ),
            ),
            UserDataRead::Found(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Ok(Some(SecretString::new(text))),
                Err(e) => input(
                    Reason::SecretInvalid,
                    format!(
                        "Secret {secret:?} key {key:?} is not UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                ),
            },
            UserDataRead::Unavailable(m) => Err(UserDataProblem::Unavailable(format!(
                "read Secret {secret:?}: {m}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(r: UserDataRead) -> Result<Option<SecretString>, UserDataProblem> {
        r.check("ci", "user-data", 16)
    }

    fn reason(r: UserDataRead) -> Reason {
        match check(r) {
            Err(UserDataProblem::Input(reason, _)) => reason,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn outcomes_map_to_reasons() {
        assert!(check(UserDataRead::NotRequested).unwrap().is_none());
        assert_eq!(reason(UserDataRead::SecretNotFound), Reason::SecretMissing);
        assert_eq!(reason(UserDataRead::KeyNotFound), Reason::SecretMissing);
        assert_eq!(
            reason(UserDataRead::Found(vec![b'x'; 17])),
            Reason::SecretTooLarge
        );
        assert_eq!(
            reason(UserDataRead::Found(vec![0xff, 0xfe])),
            Reason::SecretInvalid
        );
        assert!(matches!(
            check(UserDataRead::Unavailable("timeout".into())),
            Err(UserDataProblem::Unavailable(_))
        ));
    }

    #[test]
    fn exactly_the_limit_is_accepted() {
        let ok = check(UserDataRead::Found(vec![b'x'; 16])).unwrap().unwrap();
        assert_eq!(ok.len(), 16);
    }

    #[test]
    fn content_never_reaches_debug_or_messages() {
        let secret = b"#cloud-config\npassword: hunter2hunter2".to_vec();
        let r = UserDataRead::Found(secret);
        assert!(!format!("{r:?}").contains("hunter2"));
        let Err(UserDataProblem::Input(_, msg)) = check(r) else {
            panic!("expected too large");
        };
        assert!(!msg.contains("hunter2"), "{msg}");
        let mut bad = b"password: hunter2".to_vec();
        bad.push(0xff);
        let Err(UserDataProblem::Input(_, msg)) = UserDataRead::Found(bad).check("s", "k", 100)
        else {
            panic!("expected invalid");
        };
        assert!(!msg.contains("hunter2"), "{msg}");
    }
}

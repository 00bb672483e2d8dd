//! The dial's credentials: the private key read from its file (on every
//! dial) or from memory, or an ssh-agent's identities.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::keys::PrivateKey;
use russh::keys::agent::AgentIdentity;
use russh::keys::agent::client::AgentClient;

use crate::config::{KeySource, Passphrase};
use crate::error::Error;
use crate::files;

/// What a dial authenticates with.
pub(crate) enum Credentials {
    /// Private keys, offered in turn (never empty).
    Keys(Vec<Arc<PrivateKey>>),
    /// An agent and the public keys it offers (never empty).
    Agent {
        /// The agent's socket (for errors).
        path: PathBuf,
        /// The open connection to it.
        client: AgentClient<tokio::net::UnixStream>,
        /// Its identities, in its order.
        identities: Vec<AgentIdentity>,
    },
}

/// How an in-memory key is named in errors.
pub(crate) const IN_MEMORY: &str = "(key in memory)";

/// The credentials of `source`.
///
/// Errors name the file (or `(key in memory)`, or the agent's socket) and
/// the parser's complaint, never key material.
pub(crate) async fn load(
    source: &KeySource,
    passphrase: Option<&Passphrase>,
) -> Result<Credentials, Error> {
    match source {
        KeySource::File(path) => {
            let text = files::read_text(path, files::MAX_KEY_FILE)
                .await
                .map_err(|source| Error::KeyFileUnreadable {
                    path: path.clone(),
                    source,
                })?;
            decode(&text, path, passphrase).map(|k| Credentials::Keys(vec![Arc::new(k)]))
        }
        KeySource::Files(paths) => {
            let mut keys = Vec::new();
            let mut missing = None;
            for path in paths {
                match files::read_text(path, files::MAX_KEY_FILE).await {
                    Ok(text) => keys.push(Arc::new(decode(&text, path, passphrase)?)),
                    Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                        missing.get_or_insert((path, source));
                    }
                    Err(source) => {
                        return Err(Error::KeyFileUnreadable {
                            path: path.clone(),
                            source,
                        });
                    }
                }
            }
            match (keys.is_empty(), missing) {
                (false, _) => Ok(Credentials::Keys(keys)),
                (true, Some((path, source))) => Err(Error::KeyFileUnreadable {
                    path: path.clone(),
                    source,
                }),
                (true, None) => Err(Error::KeyFileUnreadable {
                    path: PathBuf::new(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "no key files given",
                    ),
                }),
            }
        }
        KeySource::Memory(text) => decode(text.expose(), Path::new(IN_MEMORY), passphrase)
            .map(|k| Credentials::Keys(vec![Arc::new(k)])),
        KeySource::Agent(path) => {
            let unavailable = |reason: String| Error::AgentUnavailable {
                path: path.clone(),
                reason,
            };
            let mut client = AgentClient::connect_uds(path)
                .await
                .map_err(|e| unavailable(format!("cannot connect: {e}")))?;
            let identities = client
                .request_identities()
                .await
                .map_err(|e| unavailable(format!("cannot list its keys: {e}")))?;
            if identities.is_empty() {
                return Err(unavailable("it holds no keys (ssh-add one)".to_owned()));
            }
            Ok(Credentials::Agent {
                path: path.clone(),
                client,
                identities,
            })
        }
    }
}

fn decode(text: &str, path: &Path, passphrase: Option<&Passphrase>) -> Result<PrivateKey, Error> {
    match russh::keys::decode_secret_key(text, passphrase.map(Passphrase::expose)) {
        Ok(key) => Ok(key),
        Err(russh::keys::Error::KeyIsEncrypted) => Err(Error::KeyEncrypted {
            path: path.to_owned(),
        }),
        // A wrong passphrase surfaces as a decryption failure.
        Err(_) if passphrase.is_some() && is_encrypted_openssh(text) => Err(Error::KeyEncrypted {
            path: path.to_owned(),
        }),
        Err(e) => Err(Error::KeyInvalid {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

/// Whether `text` is an OpenSSH private key whose body is encrypted.
fn is_encrypted_openssh(text: &str) -> bool {
    russh::keys::ssh_key::PrivateKey::from_openssh(text).is_ok_and(|k| k.is_encrypted())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_invalid_and_the_error_does_not_echo_the_file() {
        let secret = "-----BEGIN OPENSSH PRIVATE KEY-----\nc2VjcmV0LXNlY3JldA==\n-----END OPENSSH PRIVATE KEY-----\n";
        let e = decode(secret, Path::new(IN_MEMORY), None).unwrap_err();
        assert!(matches!(e, Error::KeyInvalid { .. }), "{e:?}");
        let text = format!("{e} {e:?}");
        assert!(!text.contains("c2VjcmV0"), "{text}");
        assert!(e.is_permanent());
        assert!(text.contains("(key in memory)"), "{text}");
    }
}

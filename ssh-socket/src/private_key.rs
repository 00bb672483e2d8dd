//! Reading the private key file (on every dial).

use std::path::Path;
use std::sync::Arc;

use russh::keys::PrivateKey;

use crate::config::Passphrase;
use crate::error::Error;
use crate::files;

/// Reads and decodes the private key at `path`.
///
/// Errors name the file and the parser's complaint, never key material.
pub(crate) async fn load(
    path: &Path,
    passphrase: Option<&Passphrase>,
) -> Result<Arc<PrivateKey>, Error> {
    let text = files::read_text(path, files::MAX_KEY_FILE)
        .await
        .map_err(|source| Error::KeyFileUnreadable {
            path: path.to_owned(),
            source,
        })?;
    decode(&text, path, passphrase).map(Arc::new)
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
        let e = decode(secret, Path::new("/k"), None).unwrap_err();
        assert!(matches!(e, Error::KeyInvalid { .. }), "{e:?}");
        let text = format!("{e} {e:?}");
        assert!(!text.contains("c2VjcmV0"), "{text}");
        assert!(e.is_permanent());
    }
}

//! [`ProxyCredentials`]: the user and password a proxy's basic
//! authentication accepts, read from the credentials file a providers
//! config names (`proxy.credentials_file`: `user:password`, one line). The
//! password is a [`SecretString`]: no `Debug`, `Display` or error of this
//! module shows it.

use std::fmt;

use crate::secret::SecretString;

/// The largest credentials file read (4 KiB).
pub const MAX_CREDENTIALS_FILE: usize = 4096;

/// A proxy's basic-authentication credentials.
#[derive(Clone)]
pub struct ProxyCredentials {
    user: String,
    password: SecretString,
}

/// Why a credentials file was refused (never naming the password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proxy credentials file: {0}")]
pub struct CredentialsError(&'static str);

impl ProxyCredentials {
    /// The rule a credentials file satisfies.
    pub const RULE: &'static str = "one line `user:password`: a user of 1-64 letters, digits, \
         '.', '_' or '-', and a password of 1-256 printable characters";

    /// Parses a credentials file's text (a trailing newline is allowed).
    ///
    /// # Errors
    /// [`CredentialsError`] with [`Self::RULE`]'s reason; the message never
    /// contains the password.
    pub fn parse(text: &str) -> Result<Self, CredentialsError> {
        if text.len() > MAX_CREDENTIALS_FILE {
            return Err(CredentialsError("larger than 4 KiB"));
        }
        let line = text.strip_suffix('\n').unwrap_or(text);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (user, password) = line
            .split_once(':')
            .ok_or(CredentialsError("not `user:password`"))?;
        let user_ok = (1..=64).contains(&user.len())
            && user
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !user_ok {
            return Err(CredentialsError(
                "the user must be 1-64 letters, digits, '.', '_' or '-'",
            ));
        }
        let password_ok = (1..=256).contains(&password.chars().count())
            && password.chars().all(|c| !c.is_control());
        if !password_ok {
            return Err(CredentialsError(
                "the password must be 1-256 printable characters on one line",
            ));
        }
        Ok(Self {
            user: user.to_owned(),
            password: SecretString::new(password),
        })
    }

    /// The credentials from a credentials file's read: `read` is what
    /// reading `path` gave (the caller reads it, with its own IO).
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent): the file could not be
    /// read (its Secret not mounted), is not UTF-8 or breaks
    /// [`Self::RULE`]; the message names the path, never the password.
    pub fn from_file(
        path: &crate::config::AbsolutePath,
        read: std::io::Result<Vec<u8>>,
    ) -> Result<Self, crate::Error> {
        let bytes = read.map_err(|e| {
            crate::Error::permanent(format!(
                "cannot read the proxy credentials file {path}: {} (is its Secret mounted?)",
                e.kind()
            ))
        })?;
        let text = String::from_utf8(bytes).map_err(|_| {
            crate::Error::permanent(format!("the proxy credentials file {path} is not UTF-8"))
        })?;
        Self::parse(&text).map_err(|e| crate::Error::permanent(format!("{path}: {e}")))
    }

    /// The user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The password (handle with care: never log it).
    pub fn password(&self) -> &SecretString {
        &self.password
    }
}

impl fmt::Debug for ProxyCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyCredentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_one_line_and_never_shows_the_password() {
        let c = ProxyCredentials::parse("egress:s3cr:et pass\n").unwrap();
        assert_eq!(c.user(), "egress");
        assert_eq!(c.password().expose_secret(), "s3cr:et pass");
        assert!(!format!("{c:?}").contains("s3cr"));
    }

    #[test]
    fn refuses_what_squid_could_not_take() {
        for bad in [
            "",
            "nopassword",
            ":pw",
            "us er:pw",
            "user:",
            "user:pw\nmore",
            &format!("{}:pw", "u".repeat(65)),
            &format!("user:{}", "p".repeat(257)),
        ] {
            let e = ProxyCredentials::parse(bad).unwrap_err();
            assert!(
                !e.to_string().contains("pw") || bad.starts_with("us er"),
                "{e}"
            );
        }
    }
}

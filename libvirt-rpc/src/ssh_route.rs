//! What an SSH URI (`qemu+ssh://`, `+libssh`, `+libssh2`) asks for, read
//! before any IO and with or without the `ssh` feature: host, port, user,
//! the authentication methods in order, the known_hosts file — and the
//! parameters refused because this crate cannot do what they ask. A pure
//! function of the URI; the login resolved against the machine and the
//! dial are in `ssh.rs` (feature `ssh`).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::uri::Uri;

/// The private keys tried when the URI names none, in OpenSSH's order.
#[cfg_attr(not(feature = "ssh"), allow(dead_code))]
pub(crate) const DEFAULT_KEYS: [&str; 3] = [".ssh/id_rsa", ".ssh/id_ecdsa", ".ssh/id_ed25519"];

/// One way to authenticate, in the order a URI's `sshauth` lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthMethod {
    /// The ssh-agent of `$SSH_AUTH_SOCK`.
    Agent,
    /// A key file: the URI's `keyfile`, else each of [`DEFAULT_KEYS`]
    /// that exists, in turn.
    Key(Option<PathBuf>),
}

/// An SSH URI's connection settings, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshRoute {
    /// Host to dial (`localhost` when the URI has none).
    pub(crate) host: String,
    /// Port to dial (22 unless the URI names one).
    pub(crate) port: u16,
    /// Whether the URI names the port (it then wins over `~/.ssh/config`).
    pub(crate) port_given: bool,
    /// The URI's user, if any.
    pub(crate) user: Option<String>,
    /// How to authenticate, first usable wins.
    pub(crate) auth: Vec<AuthMethod>,
    /// The `known_hosts` parameter, if any.
    pub(crate) known_hosts: Option<PathBuf>,
}

fn refuse(name: &'static str, value: &str, reason: &'static str) -> Error {
    Error::UnsupportedParameter {
        name,
        value: value.to_owned(),
        reason,
    }
}

impl SshRoute {
    /// The settings of SSH URI `uri` (whose transport the caller checked).
    ///
    /// # Errors
    /// [`Error::UnsupportedParameter`] for `command`, `netcat`, `proxy`
    /// other than `auto` (no remote command is run: the daemon's socket is
    /// forwarded by the SSH server itself), `known_hosts_verify` other
    /// than `normal` (host keys are always verified), and an `sshauth`
    /// list without `agent` or `privkey`.
    pub(crate) fn for_uri(uri: &Uri) -> Result<Self> {
        const NO_COMMAND: &str = "no remote command is run: the daemon's socket is forwarded \
                                  by the SSH server (direct-streamlocal, like `ssh -L`)";
        for name in ["command", "netcat"] {
            if let Some(value) = uri.param(name) {
                return Err(refuse(name, value, NO_COMMAND));
            }
        }
        if let Some(proxy) = uri.param("proxy") {
            if !proxy.eq_ignore_ascii_case("auto") {
                return Err(refuse("proxy", proxy, NO_COMMAND));
            }
        }
        if let Some(verify) = uri.param("known_hosts_verify") {
            if !verify.eq_ignore_ascii_case("normal") {
                return Err(refuse(
                    "known_hosts_verify",
                    verify,
                    "host keys are always verified against known_hosts; add the host's key \
                     (ssh-keyscan, or one login with OpenSSH) instead",
                ));
            }
        }
        let keyfile = uri.keyfile().map(PathBuf::from);
        let auth = match uri.param("sshauth") {
            None if keyfile.is_some() => vec![AuthMethod::Key(keyfile)],
            None => vec![AuthMethod::Agent, AuthMethod::Key(None)],
            Some(list) => {
                let auth: Vec<AuthMethod> = list
                    .split(',')
                    .filter_map(|m| match m.trim().to_ascii_lowercase().as_str() {
                        "agent" => Some(AuthMethod::Agent),
                        "privkey" => Some(AuthMethod::Key(keyfile.clone())),
                        _ => None,
                    })
                    .collect();
                if auth.is_empty() {
                    return Err(refuse(
                        "sshauth",
                        list,
                        "only agent and privkey authentication are implemented",
                    ));
                }
                auth
            }
        };
        Ok(Self {
            host: uri.host().unwrap_or("localhost").to_owned(),
            port: uri.port_or_default().unwrap_or(22),
            port_given: uri.port().is_some(),
            user: uri.user().map(str::to_owned),
            auth,
            known_hosts: uri.param("known_hosts").map(PathBuf::from),
        })
    }
}

#[cfg(test)]
mod tests;

//! (Feature `ssh`.) SSH URIs dialled with `ssh-socket`: the login of an
//! [`SshRoute`] resolved against the machine ([`Host`], faked in the unit
//! tests), the daemon's socket forwarded, and the stream handed to
//! [`Client::connect`](crate::Client::connect) by `connect_uri`.

use std::path::{Path, PathBuf};

use ssh_socket::{HostKeyPolicy, KeySource, SshConfig, SshSocket};

use crate::connect_uri::ConnectOptions;
use crate::error::{Error, Result};
use crate::host::{Host, RealHost};
use crate::ssh_route::{AuthMethod, DEFAULT_KEYS, SshRoute};

/// How the dial authenticates and verifies, resolved against the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SshLogin {
    /// The remote user.
    pub(crate) user: String,
    /// The key to authenticate with (`None` when the caller brings its
    /// own).
    pub(crate) key: Option<LoginKey>,
    /// The known_hosts file that must list the host.
    pub(crate) known_hosts: PathBuf,
}

/// The key an [`SshLogin`] uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LoginKey {
    /// The identities of the ssh-agent on this socket.
    Agent(PathBuf),
    /// A private key file.
    File(PathBuf),
    /// The default key files that exist, tried in turn.
    Files(Vec<PathBuf>),
}

impl SshRoute {
    /// The login on `machine`: the URI's user else `$USER` (`$LOGNAME`);
    /// the first usable method of [`SshRoute::auth`] (the agent when
    /// `$SSH_AUTH_SOCK` is set; the URI's key file, else the first of
    /// `~/.ssh/id_rsa`, `id_ecdsa`, `id_ed25519` that exist, tried in turn as
    /// OpenSSH tries them); the URI's
    /// known_hosts else `~/.ssh/known_hosts`.
    ///
    /// With `key_given` (the caller brings its own key) no key is looked
    /// for.
    ///
    /// # Errors
    /// [`Error::SshSetup`] naming what is missing.
    pub(crate) fn login(&self, machine: &dyn Host, key_given: bool) -> Result<SshLogin> {
        let setup = |reason: String| Error::SshSetup { reason };
        let user = match &self.user {
            Some(user) => user.clone(),
            None => machine
                .var("USER")
                .or_else(|| machine.var("LOGNAME"))
                .and_then(|u| u.into_string().ok())
                .ok_or_else(|| {
                    setup("the URI names no user and USER/LOGNAME are not set".into())
                })?,
        };
        let home = machine.home();
        let mut key = None;
        for method in self.auth.iter().filter(|_| !key_given) {
            key = match method {
                AuthMethod::Agent => machine
                    .var("SSH_AUTH_SOCK")
                    .map(|p| LoginKey::Agent(PathBuf::from(p))),
                AuthMethod::Key(Some(file)) => Some(LoginKey::File(file.clone())),
                AuthMethod::Key(None) => home
                    .as_ref()
                    .map(|home| {
                        DEFAULT_KEYS
                            .iter()
                            .map(|k| home.join(k))
                            .filter(|k| machine.exists(k))
                            .collect::<Vec<_>>()
                    })
                    .filter(|found| !found.is_empty())
                    .map(LoginKey::Files),
            };
            if key.is_some() {
                break;
            }
        }
        if key.is_none() && !key_given {
            return Err(setup(format!(
                "no key to authenticate with: tried {} (give keyfile= in the URI)",
                self.auth
                    .iter()
                    .map(|m| match m {
                        AuthMethod::Agent => "an ssh-agent (SSH_AUTH_SOCK is not set)".to_owned(),
                        AuthMethod::Key(Some(f)) => f.display().to_string(),
                        AuthMethod::Key(None) => "~/.ssh/id_rsa, id_ecdsa, id_ed25519".to_owned(),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let known_hosts = match (&self.known_hosts, home) {
            (Some(file), _) => file.clone(),
            (None, Some(home)) => home.join(".ssh/known_hosts"),
            (None, None) => {
                return Err(setup(
                    "HOME is not set, so there is no ~/.ssh/known_hosts (give known_hosts= in the URI)"
                        .into(),
                ));
            }
        };
        Ok(SshLogin {
            user,
            key,
            known_hosts,
        })
    }
}

/// `ssh-socket`'s settings for `route` reaching `socket` on its host,
/// with `options`' key and jump hosts (and, when given, the user's
/// OpenSSH config underneath).
pub(crate) fn ssh_config(
    route: &SshRoute,
    socket: &Path,
    options: &ConnectOptions,
) -> Result<SshConfig> {
    let socket = socket.to_str().ok_or_else(|| Error::SshSetup {
        reason: format!("the daemon's socket path {} is not UTF-8", socket.display()),
    })?;
    if let Some(user_config) = &options.ssh_user_config {
        return from_user_config(route, socket, options, user_config);
    }
    let login = route.login(&RealHost, options.ssh_key.is_some())?;
    let key = match (&options.ssh_key, login.key) {
        (Some(key), _) => key.clone(),
        (None, Some(LoginKey::Agent(path))) => KeySource::Agent(path),
        (None, Some(LoginKey::File(path))) => KeySource::File(path),
        (None, Some(LoginKey::Files(paths))) => KeySource::Files(paths),
        // `login` looks for a key whenever none is given.
        (None, None) => {
            return Err(Error::SshSetup {
                reason: "no key to authenticate with".into(),
            });
        }
    };
    let mut config = SshConfig::new(
        route.host.clone(),
        login.user,
        "",
        HostKeyPolicy::KnownHosts(login.known_hosts),
        socket,
    )
    .with_key(key)
    .with_port(route.port)
    .with_connect_timeout(options.config.call_timeout);
    for jump in &options.ssh_jumps {
        config = config.with_jump(jump.clone());
    }
    Ok(config)
}

/// The dial `ssh alias` would make for the URI's host as an alias of
/// `user_config` (`HostName`, `User`, `Port`, `IdentityFile`,
/// `ProxyJump`, `UserKnownHostsFile`), with what the URI and the options
/// name explicitly winning — as libvirt's `ssh` transport passes `-l`,
/// `-p`, `-i` and `UserKnownHostsFile` to OpenSSH.
fn from_user_config(
    route: &SshRoute,
    socket: &str,
    options: &ConnectOptions,
    user_config: &ssh_socket::UserConfig,
) -> Result<SshConfig> {
    let mut config = user_config
        .ssh_config_as(&route.host, route.user.as_deref(), socket)
        .map_err(|e| Error::Ssh(Box::new(e)))?
        .with_connect_timeout(options.config.call_timeout);
    if route.port_given {
        config.port = route.port;
    }
    let keyfile = route.auth.iter().find_map(|m| match m {
        AuthMethod::Key(Some(file)) => Some(file.clone()),
        _ => None,
    });
    if let Some(key) = options.ssh_key.clone() {
        config.key = key;
    } else if let Some(file) = keyfile {
        config.key = KeySource::File(file);
    }
    if let Some(file) = &route.known_hosts {
        config.host_keys = HostKeyPolicy::KnownHosts(file.clone());
    }
    if !options.ssh_jumps.is_empty() {
        config.jumps.clone_from(&options.ssh_jumps);
    }
    Ok(config)
}

/// Dials `route` and forwards `socket`.
pub(crate) async fn dial(
    route: &SshRoute,
    socket: &Path,
    options: &ConnectOptions,
) -> Result<SshSocket> {
    let config = ssh_config(route, socket, options)?;
    ssh_socket::dial(&config)
        .await
        .map_err(|e| Error::Ssh(Box::new(e)))
}

#[cfg(test)]
mod tests;

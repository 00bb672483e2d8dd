//! OpenSSH client configuration (`~/.ssh/config`), opt-in: what a user's
//! config says about a host, and the [`SshConfig`] that dials it as
//! `ssh alias` would.
//!
//! The keywords read: `Host` (patterns with `*`, `?`, `!`), `HostName`
//! (`%h`), `User`, `Port`, `IdentityFile` (several), `IdentityAgent`,
//! `ProxyJump` (hops looked up in the same config), `UserKnownHostsFile`,
//! `Include`, and `ProxyCommand` (refused: no command is run). The first
//! value obtained for a keyword wins, as in OpenSSH. `Match all` applies;
//! other `Match` blocks are not evaluated and their settings do not apply.
//! Other keywords are ignored.

mod parse;
mod pattern;

use std::path::{Path, PathBuf};

use crate::config::{HostKeyPolicy, JumpHost, KeySource, SshConfig};
use crate::error::Error;
use parse::{Condition, Files, Setting};

/// The default identity files, in OpenSSH's order (those this crate can
/// use).
const DEFAULT_IDENTITIES: [&str; 3] = ["~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ed25519"];

/// The default `UserKnownHostsFile`.
const DEFAULT_KNOWN_HOSTS: [&str; 2] = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"];

/// A parsed OpenSSH client configuration: [`UserConfig::host`] tells what
/// it says about a host, [`UserConfig::ssh_config`] builds the dial.
///
/// ```no_run
/// # fn example() -> Result<(), ssh_socket::Error> {
/// // ~/.ssh/config:  Host hv1
/// //                   HostName 10.0.0.11
/// //                   User root
/// //                   ProxyJump bastion
/// let user = ssh_socket::UserConfig::load_default()?;
/// let config = user.ssh_config("hv1", "/var/run/libvirt/libvirt-sock")?;
/// assert_eq!(config.host, "10.0.0.11");
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct UserConfig {
    settings: Vec<Setting>,
    env: Env,
}

/// What the lookups take from the process's environment.
#[derive(Debug, Clone, Default)]
struct Env {
    home: Option<PathBuf>,
    user: Option<String>,
    agent: Option<PathBuf>,
}

impl Env {
    fn from_process() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            home: var("HOME").map(PathBuf::from),
            user: var("USER")
                .or_else(|| var("LOGNAME"))
                .and_then(|u| u.into_string().ok()),
            agent: var("SSH_AUTH_SOCK").map(PathBuf::from),
        }
    }
}

/// The real file system, for `Include`.
struct RealFiles<'a>(&'a Env);

impl Files for RealFiles<'_> {
    fn read(&self, path: &Path) -> std::io::Result<String> {
        read_config(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect()
    }
    fn home(&self) -> Option<PathBuf> {
        self.0.home.clone()
    }
}

/// The largest config file read (1 MiB).
const MAX_CONFIG: u64 = 1 << 20;

fn read_config(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_CONFIG} bytes"),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

fn config_error(path: PathBuf, line: usize, reason: impl Into<String>) -> Error {
    Error::UserConfig {
        path,
        line,
        reason: reason.into(),
    }
}

/// What a [`UserConfig`] says about one host.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HostSettings {
    /// The name asked about (the `Host` patterns match this).
    pub alias: String,
    /// `HostName` (`%h` expanded), else the alias.
    pub host_name: String,
    /// `User`, else the local user (`$USER`, `$LOGNAME`).
    pub user: String,
    /// `Port`, else 22.
    pub port: u16,
    /// Every `IdentityFile`, in order, `~` and tokens expanded (empty:
    /// none given).
    pub identity_files: Vec<PathBuf>,
    /// `IdentityAgent`, else `$SSH_AUTH_SOCK`; `None` for
    /// `IdentityAgent none` or neither set.
    pub identity_agent: Option<PathBuf>,
    /// `UserKnownHostsFile`'s files, else `~/.ssh/known_hosts` and
    /// `~/.ssh/known_hosts2`.
    pub known_hosts_files: Vec<PathBuf>,
    /// `ProxyJump`'s hops as written (`[user@]host[:port]`), first dialled
    /// first; empty for none.
    pub proxy_jump: Vec<String>,
}

impl UserConfig {
    /// Reads `~/.ssh/config` (and what it includes); a missing file is an
    /// empty config. Reads the files synchronously (they are small): call
    /// it once, up front.
    ///
    /// # Errors
    /// [`Error::UserConfig`] naming the file and line.
    pub fn load_default() -> Result<Self, Error> {
        let env = Env::from_process();
        let Some(home) = env.home.clone() else {
            return Ok(Self {
                settings: Vec::new(),
                env,
            });
        };
        Self::load_with(&home.join(".ssh/config"), env, true)
    }

    /// Reads the config file `path` (as `ssh -F path`).
    ///
    /// # Errors
    /// [`Error::UserConfig`] naming the file (missing, unreadable) or the
    /// line that cannot be parsed.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::load_with(path.as_ref(), Env::from_process(), false)
    }

    fn load_with(path: &Path, env: Env, missing_ok: bool) -> Result<Self, Error> {
        let text = match read_config(path) {
            Ok(text) => text,
            Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(config_error(path.to_owned(), 0, e.to_string())),
        };
        Self::parse_with(&text, path, env)
    }

    /// Parses config `text` (relative `Include`s are under `~/.ssh`).
    ///
    /// # Errors
    /// [`Error::UserConfig`] naming the line.
    pub fn parse(text: &str) -> Result<Self, Error> {
        Self::parse_with(text, Path::new("(config text)"), Env::from_process())
    }

    fn parse_with(text: &str, path: &Path, env: Env) -> Result<Self, Error> {
        let mut settings = Vec::new();
        parse::parse(text, path, &[], 0, &RealFiles(&env), &mut settings)
            .map_err(|(path, line, reason)| config_error(path, line, reason))?;
        Ok(Self { settings, env })
    }

    /// The settings that apply to `alias`, in file order.
    fn applying<'a>(&'a self, alias: &'a str) -> impl Iterator<Item = &'a Setting> + 'a {
        self.settings.iter().filter(move |s| {
            s.conditions.iter().all(|c| match c {
                Condition::Host(patterns) => pattern::host_matches(patterns, alias),
                Condition::Match => false,
            })
        })
    }

    /// The first value of `keyword` for `alias`.
    fn first<'a>(&'a self, alias: &'a str, keyword: &str) -> Option<&'a Setting> {
        self.applying(alias).find(|s| s.keyword == keyword)
    }

    /// What the config says about `alias`, OpenSSH's defaults filled in.
    ///
    /// # Errors
    /// [`Error::UserConfig`] for a bad `Port`, an unknown `%` token, `~user`
    /// paths, no local user to default to.
    pub fn host(&self, alias: &str) -> Result<HostSettings, Error> {
        self.resolve(alias, None)
    }

    /// As [`UserConfig::host`], with `login` (when given) as the user, as
    /// `ssh -l login alias` (it wins over `User`, and `%r` is it).
    fn resolve(&self, alias: &str, login: Option<&str>) -> Result<HostSettings, Error> {
        let bad = |s: &Setting, reason: String| config_error(s.file.clone(), s.line, reason);
        let host_name = match self.first(alias, "hostname") {
            Some(s) => self
                .expand(&s.args[0], &[('h', alias)])
                .map_err(|r| bad(s, r))?,
            None => alias.to_owned(),
        };
        let user = match (login, self.first(alias, "user")) {
            (Some(login), _) => login.to_owned(),
            (None, Some(s)) => s.args[0].clone(),
            (None, None) => self.env.user.clone().ok_or_else(|| {
                config_error(
                    PathBuf::new(),
                    0,
                    format!("no User for {alias} and USER/LOGNAME are not set"),
                )
            })?,
        };
        let port = match self.first(alias, "port") {
            Some(s) => s.args[0]
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad(s, format!("Port {:?} is not a port", s.args[0])))?,
            None => 22,
        };
        let port_text = port.to_string();
        let local_user = self.env.user.clone().unwrap_or_default();
        let home = self
            .env
            .home
            .as_ref()
            .map(|h| h.display().to_string())
            .unwrap_or_default();
        let tokens = [
            ('h', host_name.as_str()),
            ('n', alias),
            ('p', port_text.as_str()),
            ('r', user.as_str()),
            ('u', local_user.as_str()),
            ('d', home.as_str()),
        ];
        let path = |s: &Setting, arg: &str| -> Result<PathBuf, Error> {
            let text = self.expand(arg, &tokens).map_err(|r| bad(s, r))?;
            parse::tilde(&text, self.env.home.as_deref()).map_err(|r| bad(s, r))
        };
        let mut identity_files = Vec::new();
        for s in self.applying(alias).filter(|s| s.keyword == "identityfile") {
            identity_files.push(path(s, &s.args[0])?);
        }
        let identity_agent = match self.first(alias, "identityagent") {
            Some(s) if s.args[0].eq_ignore_ascii_case("none") => None,
            Some(s) if s.args[0] == "SSH_AUTH_SOCK" => self.env.agent.clone(),
            Some(s) => Some(path(s, &s.args[0])?),
            None => self.env.agent.clone(),
        };
        let known_hosts_files = match self.first(alias, "userknownhostsfile") {
            Some(s) => s
                .args
                .iter()
                .map(|a| path(s, a))
                .collect::<Result<_, _>>()?,
            None => DEFAULT_KNOWN_HOSTS
                .iter()
                .filter_map(|f| parse::tilde(f, self.env.home.as_deref()).ok())
                .collect(),
        };
        let proxy_jump = match self.first(alias, "proxyjump") {
            Some(s) if s.args[0].eq_ignore_ascii_case("none") => Vec::new(),
            Some(s) => s.args[0].split(',').map(str::to_owned).collect(),
            None => match self.first(alias, "proxycommand") {
                Some(s) if !s.args[0].eq_ignore_ascii_case("none") => {
                    return Err(bad(
                        s,
                        "ProxyCommand is not supported (no command is run); use ProxyJump".into(),
                    ));
                }
                _ => Vec::new(),
            },
        };
        Ok(HostSettings {
            alias: alias.to_owned(),
            host_name,
            user,
            port,
            identity_files,
            identity_agent,
            known_hosts_files,
            proxy_jump,
        })
    }

    /// `text` with `%x` tokens replaced from `tokens` and `%%` by `%`.
    fn expand(&self, text: &str, tokens: &[(char, &str)]) -> Result<String, String> {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            match chars.next() {
                Some('%') => out.push('%'),
                Some(t) => match tokens.iter().find(|(k, _)| *k == t) {
                    Some((_, v)) => out.push_str(v),
                    None => return Err(format!("token %{t} is not supported in {text:?}")),
                },
                None => return Err(format!("a lone % ends {text:?}")),
            }
        }
        Ok(out)
    }

    /// The dial of `alias` as `ssh alias` would make it, forwarding
    /// `remote_socket`: its `HostName`, `User`, `Port`; its
    /// `IdentityFile`s tried in turn ([`KeySource::Files`]), else the
    /// agent, else OpenSSH's default key files; the first of its
    /// `UserKnownHostsFile`s that exists (else the first); each
    /// `ProxyJump` hop looked up in this config the same way (a hop's own
    /// `ProxyJump` is not followed).
    ///
    /// # Errors
    /// As [`UserConfig::host`]; a `ProxyJump` hop that is not
    /// `[user@]host[:port]`.
    pub fn ssh_config(
        &self,
        alias: &str,
        remote_socket: impl Into<String>,
    ) -> Result<SshConfig, Error> {
        self.ssh_config_as(alias, None, remote_socket)
    }

    /// As [`UserConfig::ssh_config`], logging in as `login` when given
    /// (`ssh -l login alias`: it wins over the config's `User`).
    ///
    /// # Errors
    /// As [`UserConfig::ssh_config`].
    pub fn ssh_config_as(
        &self,
        alias: &str,
        login: Option<&str>,
        remote_socket: impl Into<String>,
    ) -> Result<SshConfig, Error> {
        let target = self.resolve(alias, login)?;
        let mut config = SshConfig::new(
            target.host_name.clone(),
            target.user.clone(),
            "",
            self.known_hosts(&target),
            remote_socket,
        )
        .with_port(target.port)
        .with_key(self.key(&target));
        for hop in &target.proxy_jump {
            config = config.with_jump(self.jump(alias, hop)?);
        }
        Ok(config)
    }

    fn key(&self, host: &HostSettings) -> KeySource {
        if !host.identity_files.is_empty() {
            return KeySource::Files(host.identity_files.clone());
        }
        if let Some(agent) = &host.identity_agent {
            return KeySource::Agent(agent.clone());
        }
        KeySource::Files(
            DEFAULT_IDENTITIES
                .iter()
                .filter_map(|f| parse::tilde(f, self.env.home.as_deref()).ok())
                .collect(),
        )
    }

    fn known_hosts(&self, host: &HostSettings) -> HostKeyPolicy {
        let file = host
            .known_hosts_files
            .iter()
            .find(|f| f.exists())
            .or(host.known_hosts_files.first())
            .cloned()
            .unwrap_or_default();
        HostKeyPolicy::KnownHosts(file)
    }

    /// Jump host `hop` (`[ssh://][user@]host[:port]`) of `alias`.
    fn jump(&self, alias: &str, hop: &str) -> Result<JumpHost, Error> {
        let bad = || {
            config_error(
                PathBuf::new(),
                0,
                format!("ProxyJump hop {hop:?} of {alias} is not [user@]host[:port]"),
            )
        };
        let spec = hop.strip_prefix("ssh://").unwrap_or(hop);
        let (user, address) = match spec.rsplit_once('@') {
            Some((user, address)) => (Some(user), address),
            None => (None, spec),
        };
        let (host, port) = if let Some(rest) = address.strip_prefix('[') {
            let (host, rest) = rest.split_once(']').ok_or_else(bad)?;
            (host, rest.strip_prefix(':'))
        } else {
            match address.rsplit_once(':') {
                Some((host, port)) if !host.contains(':') => (host, Some(port)),
                _ => (address, None),
            }
        };
        if host.is_empty() {
            return Err(bad());
        }
        let port = port
            .map(|p| p.parse::<u16>().ok().filter(|p| *p != 0).ok_or_else(bad))
            .transpose()?;
        let settings = self.resolve(host, user)?;
        Ok(JumpHost::new(
            settings.host_name.clone(),
            settings.user.clone(),
            "",
            self.known_hosts(&settings),
        )
        .with_port(port.unwrap_or(settings.port))
        .with_key(self.key(&settings)))
    }
}

#[cfg(test)]
mod tests;

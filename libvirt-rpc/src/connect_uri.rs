//! [`Client::connect_uri`]: from a parsed [`Uri`] to a connected client,
//! choosing the transport as libvirt's remote driver does.
//!
//! The choice is a pure function of the URI ([`Route::for_uri`], unit
//! tested); [`Client::connect_uri`] then does the IO.

use crate::client::Client;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::flags::OpenFlags;
use crate::ssh_route::SshRoute;
use crate::uri::{Transport, Uri};

/// How [`Client::connect_uri`] connects: open flags, the client's
/// [`Config`], (feature `tls`) TLS credentials to use instead of the files
/// the URI points at, and (feature `ssh`) an SSH key and jump hosts.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    flags: OpenFlags,
    pub(crate) config: Config,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::TlsCredentials>,
    #[cfg(feature = "ssh")]
    pub(crate) ssh_key: Option<ssh_socket::KeySource>,
    #[cfg(feature = "ssh")]
    pub(crate) ssh_jumps: Vec<ssh_socket::JumpHost>,
    #[cfg(feature = "ssh")]
    pub(crate) ssh_user_config: Option<ssh_socket::UserConfig>,
}

impl ConnectOptions {
    /// No flags, [`Config::default`], TLS credentials from the URI's files.
    pub fn new() -> Self {
        Self::default()
    }

    /// Flags of the connect-open ([`OpenFlags::READ_ONLY`] also picks a
    /// local daemon's read-only socket).
    #[must_use]
    pub fn flags(mut self, flags: OpenFlags) -> Self {
        self.flags = flags;
        self
    }

    /// The client's configuration (its call timeout also bounds the TCP
    /// connect, each TLS step and the SSH dial).
    #[must_use]
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// (Feature `tls`.) Credentials for `+tls` URIs, instead of the files
    /// the URI's `pkipath` or libvirt's defaults name ([`crate::PkiPaths`]).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[must_use]
    pub fn tls_credentials(mut self, credentials: crate::tls::TlsCredentials) -> Self {
        self.tls = Some(credentials);
        self
    }

    /// (Feature `ssh`.) The key for SSH URIs, instead of the URI's
    /// `keyfile`, the ssh-agent or the default key files: a file, key text
    /// held in memory (e.g. from a secret store) or an agent's socket.
    #[cfg(feature = "ssh")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
    #[must_use]
    pub fn ssh_key(mut self, key: ssh_socket::KeySource) -> Self {
        self.ssh_key = Some(key);
        self
    }

    /// (Feature `ssh`.) Reach an SSH URI's host through this bastion
    /// (`ssh -J`); call again for a chain, the first call's host dialled
    /// first.
    #[cfg(feature = "ssh")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
    #[must_use]
    pub fn ssh_jump(mut self, jump: ssh_socket::JumpHost) -> Self {
        self.ssh_jumps.push(jump);
        self
    }

    /// (Feature `ssh`.) Read SSH URIs' hosts as aliases of this OpenSSH
    /// client config — `ssh_socket::UserConfig::load_default()` for the
    /// user's `~/.ssh/config` — as libvirt's `ssh` transport does by
    /// running OpenSSH: its `HostName`, `User`, `Port`, `IdentityFile`,
    /// `ProxyJump` and `UserKnownHostsFile` apply, and what the URI or
    /// these options name explicitly wins. Off unless called.
    #[cfg(feature = "ssh")]
    #[cfg_attr(docsrs, doc(cfg(feature = "ssh")))]
    #[must_use]
    pub fn ssh_user_config(mut self, config: ssh_socket::UserConfig) -> Self {
        self.ssh_user_config = Some(config);
        self
    }
}

/// Where a URI's connection goes: what [`Client::connect_uri`] decided
/// before any IO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// A local daemon's unix socket ([`Uri::daemon_socket`] picks it).
    Unix,
    /// Plain TCP.
    Tcp {
        /// Host to dial.
        host: String,
        /// Port to dial.
        port: u16,
    },
    /// TLS over TCP; the host is also the name the daemon's certificate
    /// must carry.
    Tls {
        /// Host to dial and to verify.
        host: String,
        /// Port to dial.
        port: u16,
    },
    /// SSH, the daemon's unix socket forwarded.
    Ssh(SshRoute),
}

/// A remote URI without a host means this host (libvirt's rule).
const DEFAULT_HOST: &str = "localhost";

impl Route {
    /// The route for `uri`.
    ///
    /// # Errors
    /// [`Error::UnsupportedTransport`] for `ext`;
    /// [`Error::UnsupportedParameter`] for parameters asking for what this
    /// crate does not do (`auth=sasl...`, `no_verify=1`, and the SSH ones
    /// [`SshRoute::for_uri`] lists).
    pub(crate) fn for_uri(uri: &Uri) -> Result<Self> {
        // No let chains: the MSRV is 1.85.
        if let Some(auth) = uri.param("auth") {
            if auth.to_ascii_lowercase().starts_with("sasl") {
                return Err(Error::UnsupportedParameter {
                    name: "auth",
                    value: auth.to_owned(),
                    reason: "SASL authentication is not implemented",
                });
            }
        }
        let host = || uri.host().unwrap_or(DEFAULT_HOST).to_owned();
        // Only fails for a transport without a port, handled above it.
        let port = |t: Transport| uri.port().or(t.default_port()).unwrap_or(0);
        match uri.transport() {
            Transport::Unix => Ok(Self::Unix),
            Transport::Tcp => Ok(Self::Tcp {
                host: host(),
                port: port(Transport::Tcp),
            }),
            Transport::Tls => {
                if let Some(v) = uri.param("no_verify") {
                    if v != "0" {
                        return Err(Error::UnsupportedParameter {
                            name: "no_verify",
                            value: v.to_owned(),
                            reason: "the daemon's certificate is always verified",
                        });
                    }
                }
                Ok(Self::Tls {
                    host: host(),
                    port: port(Transport::Tls),
                })
            }
            Transport::Ssh | Transport::Libssh | Transport::Libssh2 => {
                SshRoute::for_uri(uri).map(Self::Ssh)
            }
            t => Err(Error::UnsupportedTransport {
                transport: t,
                reason: "external commands are not run",
            }),
        }
    }
}

impl Client {
    /// Connects as libvirt's own client would for `uri`: a local daemon's
    /// unix socket (`qemu:///system`, `qemu:///session`, `test:///default`,
    /// `+unix` with `socket=`; the socket chosen by
    /// [`Uri::daemon_socket`], modular daemons included), plain TCP
    /// (`+tcp`, port 16509), TLS (`+tls`, or a URI with a host and no
    /// transport; port 16514; feature `tls`), or SSH (`+ssh`, `+libssh`,
    /// `+libssh2`; port 22; feature `ssh`), then opens [`Uri::name`].
    ///
    /// For `+tls` the credentials are those of
    /// `ConnectOptions::tls_credentials`, else the files of
    /// `PkiPaths::for_uri` (the `pkipath`
    /// parameter, `~/.pki/libvirt` for non-root users, `/etc/pki`); the
    /// daemon's certificate must name the URI's host.
    ///
    /// For SSH URIs the daemon's socket ([`Uri::remote_socket`]: `socket=`,
    /// else libvirtd's, which modular hosts serve too) is forwarded by the
    /// SSH server itself (no remote command or helper runs), through
    /// `ssh-socket`. The login: the URI's user, else `$USER`; the key of
    /// `ConnectOptions::ssh_key`, else `keyfile=`, else (or in the order
    /// `sshauth=agent,privkey` gives) the ssh-agent of `$SSH_AUTH_SOCK`,
    /// then `~/.ssh/id_rsa`, `id_ecdsa`, `id_ed25519` in turn; the
    /// host key must be in `known_hosts=`, else `~/.ssh/known_hosts`
    /// (plain, hashed, `[host]:port` and `@cert-authority` lines). Jump
    /// hosts come from `ConnectOptions::ssh_jump`. With
    /// `ConnectOptions::ssh_user_config` the host is read as an alias of
    /// that OpenSSH config first. Closing the client ends the SSH session
    /// without blocking.
    ///
    /// ```no_run
    /// use libvirt_rpc::{Client, ConnectOptions, Uri};
    ///
    /// # async fn example() -> Result<(), libvirt_rpc::Error> {
    /// let uri: Uri = "qemu:///system".parse()?;
    /// let client = Client::connect_uri(&uri, &ConnectOptions::new()).await?;
    /// println!("libvirt {}", client.connect_get_lib_version().await?);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::UnsupportedTransport`] for `ext` URIs, for TLS without the
    /// `tls` feature and SSH without the `ssh` feature;
    /// [`Error::UnsupportedParameter`] for `auth=sasl...`, `no_verify=1`,
    /// and for SSH `command=`, `netcat=`, `proxy=` other than `auto`,
    /// `known_hosts_verify=` other than `normal`, an `sshauth=` without
    /// `agent` or `privkey`; [`Error::Uri`] when no local daemon socket
    /// is found (or, for SSH, `mode=direct` or a session URI without
    /// `socket=`); `Error::SshSetup` when no user, key or known_hosts file
    /// can be found, `Error::Ssh` when the dial fails
    /// ([`Error::is_transient`] tells a retry from a fix); otherwise as
    /// [`Client::connect_unix`], [`Client::connect_tcp`] or
    /// `Client::connect_tls`.
    ///
    /// # Cancel safety
    /// As [`Client::connect`].
    pub async fn connect_uri(uri: &Uri, options: &ConnectOptions) -> Result<Self> {
        let (flags, config) = (options.flags, options.config.clone());
        match Route::for_uri(uri)? {
            Route::Unix => {
                let socket = uri.daemon_socket(flags)?;
                Self::connect_unix(socket, &uri.name(), flags, config).await
            }
            Route::Tcp { host, port } => {
                Self::connect_tcp((host.as_str(), port), &uri.name(), flags, config).await
            }
            #[cfg(feature = "tls")]
            Route::Tls { host, port } => {
                let files;
                let tls = match &options.tls {
                    Some(tls) => tls,
                    None => {
                        files = crate::tls::TlsCredentials::from_files(
                            &crate::tls::PkiPaths::for_uri(uri),
                        )?;
                        &files
                    }
                };
                Self::connect_tls(
                    (host.as_str(), port),
                    &host,
                    tls,
                    &uri.name(),
                    flags,
                    config,
                )
                .await
            }
            #[cfg(not(feature = "tls"))]
            Route::Tls { .. } => Err(Error::UnsupportedTransport {
                transport: Transport::Tls,
                reason: "built without the `tls` feature",
            }),
            #[cfg(feature = "ssh")]
            Route::Ssh(route) => {
                let socket = uri.remote_socket(flags)?;
                let stream = crate::ssh::dial(&route, &socket, options).await?;
                Self::connect(stream, &uri.name(), flags, config).await
            }
            #[cfg(not(feature = "ssh"))]
            Route::Ssh(_) => Err(Error::UnsupportedTransport {
                transport: uri.transport(),
                reason: "built without the `ssh` feature",
            }),
        }
    }
}

#[cfg(test)]
mod tests;

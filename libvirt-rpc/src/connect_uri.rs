//! [`Client::connect_uri`]: from a parsed [`Uri`] to a connected client,
//! choosing the transport as libvirt's remote driver does.
//!
//! The choice is a pure function of the URI ([`Route::for_uri`], unit
//! tested); [`Client::connect_uri`] then does the IO.

use crate::client::Client;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::flags::OpenFlags;
use crate::uri::{Transport, Uri};

/// How [`Client::connect_uri`] connects: open flags, the client's
/// [`Config`], and (feature `tls`) TLS credentials to use instead of the
/// files the URI points at.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    flags: OpenFlags,
    config: Config,
    #[cfg(feature = "tls")]
    tls: Option<crate::tls::TlsCredentials>,
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
    /// connect and each TLS step).
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
}

/// A remote URI without a host means this host (libvirt's rule).
const DEFAULT_HOST: &str = "localhost";

impl Route {
    /// The route for `uri`.
    ///
    /// # Errors
    /// [`Error::UnsupportedTransport`] for SSH (compose it: see
    /// [`Client::connect_uri`]) and `ext`;
    /// [`Error::UnsupportedParameter`] for parameters asking for what this
    /// crate does not do (`auth=sasl...`, `no_verify=1`).
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
            t @ (Transport::Ssh | Transport::Libssh | Transport::Libssh2) => {
                Err(Error::UnsupportedTransport {
                    transport: t,
                    reason: "dial SSH yourself (the workspace's ssh-socket forwards \
                             Uri::remote_socket) and pass the stream to Client::connect",
                })
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
    /// (`+tcp`, port 16509), or TLS (`+tls`, or a URI with a host and no
    /// transport; port 16514; feature `tls`), then opens [`Uri::name`].
    ///
    /// For `+tls` the credentials are those of
    /// `ConnectOptions::tls_credentials`, else the files of
    /// `PkiPaths::for_uri` (the `pkipath`
    /// parameter, `~/.pki/libvirt` for non-root users, `/etc/pki`); the
    /// daemon's certificate must name the URI's host.
    ///
    /// SSH URIs (`+ssh`, `+libssh`, `+libssh2`) are not dialled here: this
    /// crate has no SSH client. Dial with one — the workspace's
    /// `ssh-socket` forwards the socket [`Uri::remote_socket`] names — and
    /// pass the stream to [`Client::connect`] with [`Uri::name`]; the
    /// `connect_ssh` example does exactly that.
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
    /// [`Error::UnsupportedTransport`] for SSH and `ext` URIs, and for TLS
    /// without the `tls` feature; [`Error::UnsupportedParameter`] for
    /// `auth=sasl...` and `no_verify=1`; [`Error::Uri`] when no local
    /// daemon socket is found; otherwise as [`Client::connect_unix`],
    /// [`Client::connect_tcp`] or `Client::connect_tls`.
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
        }
    }
}

#[cfg(test)]
mod tests;

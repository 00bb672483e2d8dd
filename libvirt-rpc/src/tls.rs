//! TLS to libvirtd (feature `tls`): credentials, the handshake, and the
//! daemon's confirmation byte.
//!
//! libvirtd's TLS port (16514, `listen_tls`) speaks TLS first and libvirt's
//! protocol inside it, with one step between: once the handshake is done
//! the daemon checks the client's certificate (signed by its CA, valid
//! now, meant for client use, its DN in `tls_allowed_dn_list` when that is
//! set) and then sends **one byte, `1`, as TLS data**; when a check fails it
//! closes the connection instead. A client that speaks RPC before reading
//! that byte reads it as the start of a packet length. [`TlsCredentials::handshake`]
//! does the handshake and reads the byte, so what it returns is ready for
//! [`Client::connect`](crate::Client::connect);
//! [`Client::connect_tls`](crate::Client::connect_tls) does all of it from
//! an address.
//!
//! Certificates are checked by rustls (ring provider, TLS 1.2 and 1.3, its
//! safe defaults; libvirt's `tls_priority` has no equivalent here): the
//! daemon's chain against the CA you give, and the name you dial against
//! the certificate's subjectAltName (DNS name or IP address). Unlike
//! GnuTLS, rustls does not fall back to the subject's CN: a server
//! certificate naming its host only in CN (as some old libvirt guides
//! make them) is refused with [`Error::TlsServerCertificate`]; re-issue
//! it with a subjectAltName. CRLs (`cacrl.pem`) are not read.

mod pki_paths;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::error::{Error, Result};

pub use pki_paths::PkiPaths;

/// The byte libvirtd sends after the handshake when it accepts the client
/// (`virNetServerClientCheckAccess`).
const CONFIRMATION: u8 = 1;

/// One of the three files of a client's TLS credentials, as libvirt names
/// them under a `pkipath` directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PkiFile {
    /// The CA certificate(s) the daemon's certificate must chain to
    /// (`cacert.pem`).
    CaCert,
    /// The client's certificate, and any intermediates after it
    /// (`clientcert.pem`).
    ClientCert,
    /// The client certificate's private key: PKCS#8, PKCS#1 or SEC1 PEM,
    /// unencrypted (`clientkey.pem`).
    ClientKey,
}

impl PkiFile {
    /// The file's name in a `pkipath` directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::CaCert => "cacert.pem",
            Self::ClientCert => "clientcert.pem",
            Self::ClientKey => "clientkey.pem",
        }
    }
}

impl fmt::Display for PkiFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CaCert => "CA certificate",
            Self::ClientCert => "client certificate",
            Self::ClientKey => "client private key",
        })
    }
}

/// Which TLS step took too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsStage {
    /// The TLS handshake.
    Handshake,
    /// Waiting for the daemon's confirmation byte after the handshake.
    Confirmation,
}

impl fmt::Display for TlsStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Handshake => "handshake",
            Self::Confirmation => "confirmation",
        })
    }
}

/// A client's TLS credentials for libvirtd: the CA that signs the daemon's
/// certificate, and the client certificate and key the daemon checks
/// (libvirtd refuses clients without one unless `tls_no_verify_certificate`
/// is set). Cheap to clone; build it once and reuse it for every
/// connection.
///
/// `Debug` prints nothing of the key.
#[derive(Clone)]
pub struct TlsCredentials {
    config: Arc<rustls::ClientConfig>,
}

impl fmt::Debug for TlsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCredentials").finish_non_exhaustive()
    }
}

impl TlsCredentials {
    /// Credentials from PEM text: `ca` (one or more CA certificates),
    /// `cert` (the client certificate, then any intermediates) and `key`
    /// (its private key).
    ///
    /// # Errors
    /// [`Error::TlsCredentials`] naming the part that holds no usable
    /// certificate or key, or whose key does not match the certificate
    /// (its `path` is `None`). The error never quotes the key.
    pub fn from_pem(ca: &[u8], cert: &[u8], key: &[u8]) -> Result<Self> {
        let ca = certificates(PkiFile::CaCert, None, CertificateDer::pem_slice_iter(ca))?;
        let chain = certificates(
            PkiFile::ClientCert,
            None,
            CertificateDer::pem_slice_iter(cert),
        )?;
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|e| credentials_error(PkiFile::ClientKey, None, key_error(e)))?;
        Self::build(ca, chain, key, None, None)
    }

    /// Credentials read from the three files of `paths` (see [`PkiPaths`]
    /// for libvirt's default locations and the `pkipath` URI parameter).
    ///
    /// # Errors
    /// [`Error::TlsCredentials`] naming the file that cannot be read or
    /// holds no usable certificate or key, or whose key does not match the
    /// certificate. The error never quotes the key.
    pub fn from_files(paths: &PkiPaths) -> Result<Self> {
        let ca = read_certificates(PkiFile::CaCert, &paths.ca_cert)?;
        let chain = read_certificates(PkiFile::ClientCert, &paths.client_cert)?;
        let key = PrivateKeyDer::from_pem_file(&paths.client_key).map_err(|e| {
            credentials_error(PkiFile::ClientKey, Some(&paths.client_key), key_error(e))
        })?;
        Self::build(
            ca,
            chain,
            key,
            Some(&paths.ca_cert),
            Some(&paths.client_key),
        )
    }

    fn build(
        ca: Vec<CertificateDer<'static>>,
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        ca_path: Option<&Path>,
        key_path: Option<&Path>,
    ) -> Result<Self> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in ca {
            roots
                .add(cert)
                .map_err(|e| credentials_error(PkiFile::CaCert, ca_path, Box::new(e)))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            // Only fails when the provider offers none of the versions.
            .map_err(|e| credentials_error(PkiFile::CaCert, None, Box::new(e)))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| credentials_error(PkiFile::ClientKey, key_path, Box::new(e)))?;
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// Runs the TLS handshake over `io` with the daemon known as
    /// `server_name` (a DNS name or an IP address, matched against the
    /// daemon certificate's subjectAltName), then reads the daemon's
    /// confirmation byte. The result is ready for
    /// [`Client::connect`](crate::Client::connect). Each of the two steps
    /// is bounded by `timeout`.
    ///
    /// # Errors
    /// - [`Error::TlsServerName`]: `server_name` is neither a DNS name nor
    ///   an IP address.
    /// - [`Error::TlsServerCertificate`]: the daemon's certificate is not
    ///   signed by the CA, not valid for `server_name`, or expired.
    /// - [`Error::TlsRefused`]: the daemon refused this client — closed the
    ///   connection or sent a fatal certificate alert instead of its
    ///   confirmation (its CA did not sign the client certificate, the
    ///   certificate is expired or not meant for clients, its DN is not in
    ///   `tls_allowed_dn_list`), or sent a byte other than `1`.
    /// - [`Error::TlsHandshake`]: the handshake failed otherwise (no
    ///   protocol version or cipher in common, a peer that is not a TLS
    ///   server, the link lost).
    /// - [`Error::TlsTimeout`]: a step took longer than `timeout` (a peer
    ///   that accepts TCP but never answers, a daemon that never confirms).
    ///
    /// # Cancel safety
    /// Dropping the future drops `io`.
    pub async fn handshake<S>(
        &self,
        io: S,
        server_name: &str,
        timeout: Duration,
    ) -> Result<TlsStream<S>>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let name =
            ServerName::try_from(server_name.to_owned()).map_err(|_| Error::TlsServerName {
                name: server_name.to_owned(),
            })?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let mut stream = tokio::time::timeout(timeout, connector.connect(name, Box::pin(io)))
            .await
            .map_err(|_| Error::TlsTimeout {
                stage: TlsStage::Handshake,
                after: timeout,
            })?
            .map_err(|e| handshake_error(server_name, e))?;
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(timeout, stream.read(&mut byte))
            .await
            .map_err(|_| Error::TlsTimeout {
                stage: TlsStage::Confirmation,
                after: timeout,
            })?;
        match read {
            Ok(1) if byte[0] == CONFIRMATION => Ok(TlsStream { inner: stream }),
            Ok(1) => Err(Error::TlsRefused {
                received: Some(byte[0]),
                reason: None,
            }),
            Ok(_) => Err(Error::TlsRefused {
                received: None,
                reason: None,
            }),
            Err(e) => Err(Error::TlsRefused {
                received: None,
                reason: Some(e),
            }),
        }
    }
}

/// A TLS session with libvirtd whose confirmation byte has been read:
/// hand it to [`Client::connect`](crate::Client::connect). Made by
/// [`TlsCredentials::handshake`].
pub struct TlsStream<S> {
    inner: tokio_rustls::client::TlsStream<Pin<Box<S>>>,
}

impl<S> fmt::Debug for TlsStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream").finish_non_exhaustive()
    }
}

impl<S: AsyncRead + AsyncWrite> AsyncRead for TlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite> AsyncWrite for TlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn read_certificates(file: PkiFile, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let iter = CertificateDer::pem_file_iter(path)
        .map_err(|e| credentials_error(file, Some(path), Box::new(e)))?;
    certificates(file, Some(path), iter)
}

fn certificates<I>(
    file: PkiFile,
    path: Option<&Path>,
    iter: I,
) -> Result<Vec<CertificateDer<'static>>>
where
    I: Iterator<Item = std::result::Result<CertificateDer<'static>, rustls::pki_types::pem::Error>>,
{
    let certs = iter
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| credentials_error(file, path, Box::new(e)))?;
    if certs.is_empty() {
        return Err(credentials_error(
            file,
            path,
            Box::new(rustls::pki_types::pem::Error::NoItemsFound),
        ));
    }
    Ok(certs)
}

/// A PEM error about a private key, without anything of the key's text
/// (the PEM parser's messages may quote a line or a base64 fragment).
fn key_error(e: rustls::pki_types::pem::Error) -> Box<dyn std::error::Error + Send + Sync> {
    match e {
        rustls::pki_types::pem::Error::Io(io) => Box::new(io),
        rustls::pki_types::pem::Error::NoItemsFound => {
            Box::new(rustls::pki_types::pem::Error::NoItemsFound)
        }
        _ => "not a PEM private key (PKCS#8, PKCS#1 or SEC1)".into(),
    }
}

fn credentials_error(
    file: PkiFile,
    path: Option<&Path>,
    reason: Box<dyn std::error::Error + Send + Sync>,
) -> Error {
    Error::TlsCredentials {
        file,
        path: path.map(PathBuf::from),
        reason,
    }
}

/// The rustls error inside an IO error from tokio-rustls, if any.
fn rustls_error(e: &io::Error) -> Option<&rustls::Error> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
}

fn handshake_error(server_name: &str, e: io::Error) -> Error {
    use rustls::AlertDescription as Alert;
    match rustls_error(&e) {
        Some(rustls::Error::InvalidCertificate(_)) => Error::TlsServerCertificate {
            server_name: server_name.to_owned(),
            reason: Box::new(e),
        },
        // Over TLS 1.2 the daemon judges the client's certificate before
        // the handshake ends, and says no with an alert.
        Some(rustls::Error::AlertReceived(
            Alert::BadCertificate
            | Alert::UnsupportedCertificate
            | Alert::CertificateRevoked
            | Alert::CertificateExpired
            | Alert::CertificateUnknown
            | Alert::UnknownCA
            | Alert::AccessDenied
            | Alert::CertificateRequired,
        )) => Error::TlsRefused {
            received: None,
            reason: Some(e),
        },
        _ => Error::TlsHandshake {
            server_name: server_name.to_owned(),
            reason: e,
        },
    }
}

/// True for a handshake failure that TLS itself reported (a protocol or
/// certificate problem that retrying does not fix), false for the link
/// failing under it.
pub(crate) fn is_tls_level(e: &io::Error) -> bool {
    rustls_error(e).is_some() || e.kind() == io::ErrorKind::InvalidData
}

#[cfg(test)]
mod tests;

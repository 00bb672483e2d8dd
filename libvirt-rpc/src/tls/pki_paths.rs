//! Where a libvirt client's TLS credentials are, by libvirt's rules
//! (`virNetTLSContextLocateCredentials`).

use std::path::{Path, PathBuf};

use super::PkiFile;
use crate::host::{Host, RealHost};
use crate::uri::Uri;

/// The system CA certificate (`LIBVIRT_CACERT`).
const SYSTEM_CA_CERT: &str = "/etc/pki/CA/cacert.pem";
/// The system client certificate (`LIBVIRT_CLIENTCERT`).
const SYSTEM_CLIENT_CERT: &str = "/etc/pki/libvirt/clientcert.pem";
/// The system client key (`LIBVIRT_CLIENTKEY`).
const SYSTEM_CLIENT_KEY: &str = "/etc/pki/libvirt/private/clientkey.pem";

/// The three files of a client's TLS credentials (see
/// [`TlsCredentials::from_files`](super::TlsCredentials::from_files)).
///
/// libvirt's rules, which [`PkiPaths::for_uri`] follows:
/// - a `pkipath=DIR` URI parameter: `DIR/cacert.pem`, `DIR/clientcert.pem`,
///   `DIR/clientkey.pem`, whether or not they exist;
/// - else, for a process that is not root, `~/.pki/libvirt/` where the
///   files exist there (the CA on its own; certificate and key as a pair);
/// - else the system's: `/etc/pki/CA/cacert.pem`,
///   `/etc/pki/libvirt/clientcert.pem`,
///   `/etc/pki/libvirt/private/clientkey.pem`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PkiPaths {
    /// The CA certificate(s) the daemon's certificate must chain to.
    pub ca_cert: PathBuf,
    /// The client certificate (then any intermediates).
    pub client_cert: PathBuf,
    /// The client certificate's private key.
    pub client_key: PathBuf,
}

impl PkiPaths {
    /// The files in `dir` under libvirt's names (`cacert.pem`,
    /// `clientcert.pem`, `clientkey.pem`), as the `pkipath` parameter
    /// names them.
    pub fn in_dir(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        Self {
            ca_cert: dir.join(PkiFile::CaCert.file_name()),
            client_cert: dir.join(PkiFile::ClientCert.file_name()),
            client_key: dir.join(PkiFile::ClientKey.file_name()),
        }
    }

    /// The files libvirt's own client uses for `uri`: its `pkipath`
    /// parameter, else the per-user or system defaults (see [`PkiPaths`]).
    /// Looks at the process's effective user, `HOME` and which files exist.
    pub fn for_uri(uri: &Uri) -> Self {
        locate(uri.param("pkipath").map(Path::new), &RealHost)
    }
}

fn locate(pkipath: Option<&Path>, host: &dyn Host) -> PkiPaths {
    if let Some(dir) = pkipath {
        return PkiPaths::in_dir(dir);
    }
    let mut paths = PkiPaths {
        ca_cert: PathBuf::from(SYSTEM_CA_CERT),
        client_cert: PathBuf::from(SYSTEM_CLIENT_CERT),
        client_key: PathBuf::from(SYSTEM_CLIENT_KEY),
    };
    if host.is_root() {
        return paths;
    }
    let Some(home) = host.home() else {
        return paths;
    };
    let user = PkiPaths::in_dir(home.join(".pki/libvirt"));
    if host.exists(&user.ca_cert) {
        paths.ca_cert = user.ca_cert;
    }
    if host.exists(&user.client_cert) && host.exists(&user.client_key) {
        paths.client_cert = user.client_cert;
        paths.client_key = user.client_key;
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        root: bool,
        home: Option<&'static str>,
        files: &'static [&'static str],
    }

    impl Host for Fake {
        fn is_root(&self) -> bool {
            self.root
        }
        fn var(&self, _: &str) -> Option<std::ffi::OsString> {
            None
        }
        fn home(&self) -> Option<PathBuf> {
            self.home.map(PathBuf::from)
        }
        fn exists(&self, path: &Path) -> bool {
            self.files.iter().any(|f| Path::new(f) == path)
        }
    }

    fn system() -> PkiPaths {
        PkiPaths {
            ca_cert: SYSTEM_CA_CERT.into(),
            client_cert: SYSTEM_CLIENT_CERT.into(),
            client_key: SYSTEM_CLIENT_KEY.into(),
        }
    }

    #[test]
    fn pkipath_wins_even_when_its_files_are_missing() {
        let host = Fake {
            root: false,
            home: Some("/home/u"),
            files: &["/home/u/.pki/libvirt/cacert.pem"],
        };
        assert_eq!(
            locate(Some(Path::new("/p")), &host),
            PkiPaths {
                ca_cert: "/p/cacert.pem".into(),
                client_cert: "/p/clientcert.pem".into(),
                client_key: "/p/clientkey.pem".into(),
            }
        );
    }

    #[test]
    fn root_uses_the_system_files_even_with_user_files() {
        let host = Fake {
            root: true,
            home: Some("/root"),
            files: &[
                "/root/.pki/libvirt/cacert.pem",
                "/root/.pki/libvirt/clientcert.pem",
                "/root/.pki/libvirt/clientkey.pem",
            ],
        };
        assert_eq!(locate(None, &host), system());
    }

    #[test]
    fn user_files_replace_the_system_ones_where_they_exist() {
        let all = Fake {
            root: false,
            home: Some("/home/u"),
            files: &[
                "/home/u/.pki/libvirt/cacert.pem",
                "/home/u/.pki/libvirt/clientcert.pem",
                "/home/u/.pki/libvirt/clientkey.pem",
            ],
        };
        assert_eq!(locate(None, &all), PkiPaths::in_dir("/home/u/.pki/libvirt"));
        // The CA alone.
        let ca_only = Fake {
            files: &["/home/u/.pki/libvirt/cacert.pem"],
            ..all
        };
        let paths = locate(None, &ca_only);
        assert_eq!(paths.ca_cert, Path::new("/home/u/.pki/libvirt/cacert.pem"));
        assert_eq!(paths.client_cert, Path::new(SYSTEM_CLIENT_CERT));
        // Certificate and key only as a pair.
        let cert_only = Fake {
            files: &["/home/u/.pki/libvirt/clientcert.pem"],
            ..ca_only
        };
        assert_eq!(locate(None, &cert_only), system());
    }

    #[test]
    fn no_home_means_the_system_files() {
        let host = Fake {
            root: false,
            home: None,
            files: &[],
        };
        assert_eq!(locate(None, &host), system());
    }
}

//! Certificates for TLS tests, made with OpenSSL's command line (installed
//! by `cargo xtask setup`): a CA, server and client certificates it signs
//! (ECDSA P-256, with the extensions libvirt's certificate checks want),
//! laid out as libvirtd's configuration and libvirt's `pkipath` name them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A certificate and its unencrypted private key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
}

/// A self-signed CA in a directory of its own.
#[derive(Debug, Clone)]
pub struct Ca {
    /// The CA's certificate and key.
    pub pair: CertPair,
}

impl Ca {
    /// Creates a CA named `name` (its CN) as `dir/name.pem` and
    /// `dir/name-key.pem`.
    pub fn new(dir: &Path, name: &str) -> Self {
        let pair = CertPair {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        openssl(&[
            "req".as_ref(),
            "-x509".as_ref(),
            "-newkey".as_ref(),
            "ec".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:prime256v1".as_ref(),
            "-nodes".as_ref(),
            "-days".as_ref(),
            "30".as_ref(),
            "-subj".as_ref(),
            format!("/CN={name}").as_ref(),
            "-keyout".as_ref(),
            pair.key.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ]);
        Self { pair }
    }

    /// A server certificate for `names` (subjectAltName entries as OpenSSL
    /// writes them: `IP:127.0.0.1`, `DNS:localhost`), CN `cn`, written as
    /// `dir/name.pem` and `dir/name-key.pem`.
    pub fn issue_server(&self, dir: &Path, name: &str, cn: &str, names: &[&str]) -> CertPair {
        let ext = if names.is_empty() {
            String::new()
        } else {
            format!("subjectAltName={}\n", names.join(","))
        };
        self.issue(
            dir,
            name,
            &format!("/O=lvrpc-test/CN={cn}"),
            &format!(
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
                 extendedKeyUsage=serverAuth\n{ext}"
            ),
        )
    }

    /// A client certificate with subject `/O=lvrpc-test/CN=cn`, written as
    /// `dir/name.pem` and `dir/name-key.pem`.
    pub fn issue_client(&self, dir: &Path, name: &str, cn: &str) -> CertPair {
        self.issue(
            dir,
            name,
            &format!("/O=lvrpc-test/CN={cn}"),
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=clientAuth\n",
        )
    }

    fn issue(&self, dir: &Path, name: &str, subject: &str, extensions: &str) -> CertPair {
        let pair = CertPair {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        let csr = dir.join(format!("{name}.csr"));
        let ext = dir.join(format!("{name}.ext"));
        openssl(&[
            "req".as_ref(),
            "-new".as_ref(),
            "-newkey".as_ref(),
            "ec".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:prime256v1".as_ref(),
            "-nodes".as_ref(),
            "-subj".as_ref(),
            subject.as_ref(),
            "-keyout".as_ref(),
            pair.key.as_os_str(),
            "-out".as_ref(),
            csr.as_os_str(),
        ]);
        std::fs::write(&ext, extensions).unwrap();
        openssl(&[
            "x509".as_ref(),
            "-req".as_ref(),
            "-in".as_ref(),
            csr.as_os_str(),
            "-CA".as_ref(),
            self.pair.cert.as_os_str(),
            "-CAkey".as_ref(),
            self.pair.key.as_os_str(),
            "-set_serial".as_ref(),
            serial().as_ref(),
            "-days".as_ref(),
            "30".as_ref(),
            "-extfile".as_ref(),
            ext.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ]);
        let _ = std::fs::remove_file(csr);
        let _ = std::fs::remove_file(ext);
        pair
    }
}

/// A daemon's files as [`PrivateLibvirtd::start_tls`] reads them:
/// `dir/ca.pem` (`ca`'s certificate), `dir/server-cert.pem` and
/// `dir/server-key.pem` (`server`).
///
/// [`PrivateLibvirtd::start_tls`]: crate::libvirtd::PrivateLibvirtd::start_tls
pub fn daemon_dir(dir: &Path, ca: &Ca, server: &CertPair) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(&ca.pair.cert, dir.join("ca.pem")).unwrap();
    std::fs::copy(&server.cert, dir.join("server-cert.pem")).unwrap();
    std::fs::copy(&server.key, dir.join("server-key.pem")).unwrap();
}

/// A client's files under libvirt's `pkipath` names: `dir/cacert.pem`
/// (`ca`'s certificate), `dir/clientcert.pem` and `dir/clientkey.pem`
/// (`client`).
pub fn client_dir(dir: &Path, ca: &Ca, client: &CertPair) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(&ca.pair.cert, dir.join("cacert.pem")).unwrap();
    std::fs::copy(&client.cert, dir.join("clientcert.pem")).unwrap();
    std::fs::copy(&client.key, dir.join("clientkey.pem")).unwrap();
}

/// A random serial: certificates of different test CAs must not share
/// issuer and serial.
fn serial() -> String {
    format!("0x{}", crate::names::random_hex())
}

fn openssl(args: &[&std::ffi::OsStr]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl runs (cargo xtask setup installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

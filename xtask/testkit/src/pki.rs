//! Certificates for TLS tests, made by xtask's [`pki`](sandbox_kit::pki) (the
//! sandbox's own, OpenSSL's command line, installed by `cargo xtask
//! setup`): a CA, server and client certificates it signs (ECDSA P-256,
//! with the extensions libvirt's certificate checks want, valid 30 days,
//! random serials), laid out as libvirtd's configuration and libvirt's
//! `pkipath` name them.

use std::path::Path;

pub use sandbox_kit::pki::CertPair;
use sandbox_kit::pki::{Serial, Usage, self_signed, sign};

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
        self_signed(&pair, name, 30).expect("openssl makes a CA");
        Self { pair }
    }

    /// A server certificate for `names` (subjectAltName entries as OpenSSL
    /// writes them: `IP:127.0.0.1`, `DNS:localhost`), CN `cn`, written as
    /// `dir/name.pem` and `dir/name-key.pem`.
    pub fn issue_server(&self, dir: &Path, name: &str, cn: &str, names: &[&str]) -> CertPair {
        self.issue(
            dir,
            name,
            &format!("/O=lvrpc-test/CN={cn}"),
            Usage::Server(names),
        )
    }

    /// A client certificate with subject `/O=lvrpc-test/CN=cn`, written as
    /// `dir/name.pem` and `dir/name-key.pem`.
    pub fn issue_client(&self, dir: &Path, name: &str, cn: &str) -> CertPair {
        self.issue(dir, name, &format!("/O=lvrpc-test/CN={cn}"), Usage::Client)
    }

    fn issue(&self, dir: &Path, name: &str, subject: &str, usage: Usage<'_>) -> CertPair {
        let pair = CertPair {
            cert: dir.join(format!("{name}.pem")),
            key: dir.join(format!("{name}-key.pem")),
        };
        let serial = serial();
        sign(
            &self.pair,
            &pair,
            subject,
            usage,
            30,
            Serial::Given(&serial),
        )
        .expect("openssl signs a certificate");
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

#[cfg(test)]
mod tests {
    use super::*;

    fn verify(ca: &Ca, pair: &CertPair, purpose: &str) -> String {
        let out = std::process::Command::new("openssl")
            .args(["verify", "-purpose", purpose, "-CAfile"])
            .args([&ca.pair.cert, &pair.cert])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::process::Command::new("openssl")
            .args(["x509", "-noout", "-text", "-in"])
            .arg(&pair.cert)
            .output()
            .unwrap();
        String::from_utf8_lossy(&text.stdout).into_owned()
    }

    #[test]
    fn a_ca_signs_server_and_client_certificates_its_clients_verify() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Ca::new(dir.path(), "ca");
        let server = ca.issue_server(dir.path(), "server", "localhost", &["IP:127.0.0.1"]);
        let text = verify(&ca, &server, "sslserver");
        assert!(text.contains("IP Address:127.0.0.1"), "{text}");
        assert!(text.contains("CN = localhost"), "{text}");
        let bare = ca.issue_server(dir.path(), "bare", "bare", &[]);
        assert!(!verify(&ca, &bare, "sslserver").contains("Subject Alternative Name"));
        let client = ca.issue_client(dir.path(), "client", "alice");
        let text = verify(&ca, &client, "sslclient");
        assert!(text.contains("O = lvrpc-test, CN = alice"), "{text}");
        assert!(client.key.exists() && !dir.path().join("client.csr").exists());
    }
}

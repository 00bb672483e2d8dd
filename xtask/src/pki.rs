//! The sandbox's certificate authority and the certificates it signs, made
//! with OpenSSL's command line (ECDSA P-256: fast to generate, accepted by Go
//! and rustls alike).

use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cmd::{cmd, read};

/// A certificate and its private key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its unencrypted private key (PEM).
    pub key: PathBuf,
}

/// What a certificate is for.
pub enum Usage<'a> {
    /// A TLS server reachable under these subject alternative names, written
    /// as OpenSSL does (`IP:127.0.0.1`, `DNS:localhost`).
    Server(&'a [&'a str]),
    /// A TLS client; Kubernetes reads the user from CN and groups from O.
    Client,
}

/// Creates a self-signed CA named `name` in `dir`.
pub fn new_ca(dir: &Path, name: &str) -> Result<CertPair> {
    let pair = paths(dir, name);
    read(cmd(
        "openssl",
        [
            "req".as_ref(),
            "-x509".as_ref(),
            "-newkey".as_ref(),
            "ec".as_ref(),
            "-pkeyopt".as_ref(),
            "ec_paramgen_curve:prime256v1".as_ref(),
            "-nodes".as_ref(),
            "-days".as_ref(),
            "3650".as_ref(),
            "-subj".as_ref(),
            format!("/CN={name}").as_ref(),
            "-keyout".as_ref(),
            pair.key.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ],
    ))?;
    Ok(pair)
}

/// Issues a certificate signed by `ca` for `subject` (an OpenSSL subject like
/// `/O=system:masters/CN=admin`), written as `dir/name.crt` and `name.key`.
pub fn issue(
    ca: &CertPair,
    dir: &Path,
    name: &str,
    subject: &str,
    usage: Usage<'_>,
) -> Result<CertPair> {
    let pair = paths(dir, name);
    let csr = dir.join(format!("{name}.csr"));
    let ext = dir.join(format!("{name}.ext"));
    read(cmd(
        "openssl",
        [
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
        ],
    ))?;
    let extensions = match usage {
        Usage::Server(names) => format!(
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\nsubjectAltName={}\n",
            names.join(",")
        ),
        Usage::Client => "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=clientAuth\n"
            .to_owned(),
    };
    std::fs::write(&ext, extensions)?;
    read(cmd(
        "openssl",
        [
            "x509".as_ref(),
            "-req".as_ref(),
            "-in".as_ref(),
            csr.as_os_str(),
            "-CA".as_ref(),
            ca.cert.as_os_str(),
            "-CAkey".as_ref(),
            ca.key.as_os_str(),
            "-CAcreateserial".as_ref(),
            "-days".as_ref(),
            "365".as_ref(),
            "-extfile".as_ref(),
            ext.as_os_str(),
            "-out".as_ref(),
            pair.cert.as_os_str(),
        ],
    ))?;
    let _ = std::fs::remove_file(csr);
    let _ = std::fs::remove_file(ext);
    Ok(pair)
}

/// An RSA key pair for signing service-account tokens: (private, public).
pub fn signing_keys(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    read(cmd(
        "openssl",
        [
            "genrsa".as_ref(),
            "-out".as_ref(),
            private.as_os_str(),
            "2048".as_ref(),
        ],
    ))?;
    read(cmd(
        "openssl",
        [
            "rsa".as_ref(),
            "-in".as_ref(),
            private.as_os_str(),
            "-pubout".as_ref(),
            "-out".as_ref(),
            public.as_os_str(),
        ],
    ))?;
    Ok((private, public))
}

fn paths(dir: &Path, name: &str) -> CertPair {
    CertPair {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    }
}

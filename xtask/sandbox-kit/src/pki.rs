//! Certificate authorities and the certificates they sign, made with
//! OpenSSL's command line (ECDSA P-256: fast to generate, accepted by Go,
//! rustls and GnuTLS alike). The sandbox's CAs use [`new_ca`] and
//! [`issue`]; tests' short-lived ones (`testkit::pki`) use the same
//! [`self_signed`] and [`sign`] with their own file names, lifetimes and
//! serials.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

/// A certificate and its private key, as PEM files.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its unencrypted private key (PEM).
    pub key: PathBuf,
}

/// What a certificate is for.
#[derive(Debug, Clone, Copy)]
pub enum Usage<'a> {
    /// A TLS server reachable under these subject alternative names, written
    /// as OpenSSL does (`IP:127.0.0.1`, `DNS:localhost`); none leaves the
    /// extension out.
    Server(&'a [&'a str]),
    /// A TLS client; Kubernetes reads the user from CN and groups from O.
    Client,
}

/// How [`sign`] numbers a certificate.
#[derive(Debug, Clone, Copy)]
pub enum Serial<'a> {
    /// OpenSSL's serial file beside the CA's certificate (created with a
    /// random number, then counted up).
    CaFile,
    /// This number (`0x...` or decimal).
    Given(&'a str),
}

/// Creates a self-signed CA named `name` in `dir` (`name.crt`, `name.key`),
/// valid ten years.
pub fn new_ca(dir: &Path, name: &str) -> Result<CertPair> {
    let pair = paths(dir, name);
    self_signed(&pair, name, 3650)?;
    Ok(pair)
}

/// Issues a certificate signed by `ca` for `subject` (an OpenSSL subject like
/// `/O=system:masters/CN=admin`), written as `dir/name.crt` and `name.key`,
/// valid a year.
pub fn issue(
    ca: &CertPair,
    dir: &Path,
    name: &str,
    subject: &str,
    usage: Usage<'_>,
) -> Result<CertPair> {
    let pair = paths(dir, name);
    sign(ca, &pair, subject, usage, 365, Serial::CaFile)?;
    Ok(pair)
}

/// Writes a self-signed CA certificate with CN `cn`, valid `days`, and its
/// key at `pair`'s paths.
pub fn self_signed(pair: &CertPair, cn: &str, days: u32) -> Result<()> {
    openssl([
        "req".as_ref(),
        "-x509".as_ref(),
        "-newkey".as_ref(),
        "ec".as_ref(),
        "-pkeyopt".as_ref(),
        "ec_paramgen_curve:prime256v1".as_ref(),
        "-nodes".as_ref(),
        "-days".as_ref(),
        days.to_string().as_ref(),
        "-subj".as_ref(),
        format!("/CN={cn}").as_ref(),
        "-keyout".as_ref(),
        pair.key.as_os_str(),
        "-out".as_ref(),
        pair.cert.as_os_str(),
    ])
}

/// Writes a new key and a certificate for `subject` signed by `ca` at
/// `pair`'s paths, valid `days`, numbered by `serial`. The request and
/// extension files it needs beside them are removed.
pub fn sign(
    ca: &CertPair,
    pair: &CertPair,
    subject: &str,
    usage: Usage<'_>,
    days: u32,
    serial: Serial<'_>,
) -> Result<()> {
    let csr = pair.cert.with_extension("csr");
    let ext = pair.cert.with_extension("ext");
    openssl([
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
    ])?;
    std::fs::write(&ext, extensions(usage))
        .with_context(|| format!("writing {}", ext.display()))?;
    let serial_args: Vec<&OsStr> = match serial {
        Serial::CaFile => vec!["-CAcreateserial".as_ref()],
        Serial::Given(number) => vec!["-set_serial".as_ref(), number.as_ref()],
    };
    let days = days.to_string();
    let mut args: Vec<&OsStr> = vec![
        "x509".as_ref(),
        "-req".as_ref(),
        "-in".as_ref(),
        csr.as_os_str(),
        "-CA".as_ref(),
        ca.cert.as_os_str(),
        "-CAkey".as_ref(),
        ca.key.as_os_str(),
    ];
    args.extend(serial_args);
    args.extend::<[&OsStr; 6]>([
        "-days".as_ref(),
        days.as_ref(),
        "-extfile".as_ref(),
        ext.as_os_str(),
        "-out".as_ref(),
        pair.cert.as_os_str(),
    ]);
    openssl(args)?;
    let _ = std::fs::remove_file(csr);
    let _ = std::fs::remove_file(ext);
    Ok(())
}

/// An RSA key pair for signing service-account tokens: (private, public).
pub fn signing_keys(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    openssl([
        "genrsa".as_ref(),
        "-out".as_ref(),
        private.as_os_str(),
        "2048".as_ref(),
    ])?;
    openssl([
        "rsa".as_ref(),
        "-in".as_ref(),
        private.as_os_str(),
        "-pubout".as_ref(),
        "-out".as_ref(),
        public.as_os_str(),
    ])?;
    Ok((private, public))
}

/// The X.509 v3 extensions of a certificate for `usage`, as an
/// OpenSSL extension file.
fn extensions(usage: Usage<'_>) -> String {
    let common = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n";
    match usage {
        Usage::Server([]) => format!("{common}extendedKeyUsage=serverAuth\n"),
        Usage::Server(names) => format!(
            "{common}extendedKeyUsage=serverAuth\nsubjectAltName={}\n",
            names.join(",")
        ),
        Usage::Client => format!("{common}extendedKeyUsage=clientAuth\n"),
    }
}

fn paths(dir: &Path, name: &str) -> CertPair {
    CertPair {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    }
}

/// Runs `openssl ARGS`; its standard error is the message when it fails.
fn openssl<'a>(args: impl IntoIterator<Item = &'a OsStr>) -> Result<()> {
    let args: Vec<&OsStr> = args.into_iter().collect();
    let out = Command::new("openssl")
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .context("running openssl (cargo xtask setup installs it)")?;
    if !out.status.success() {
        bail!(
            "`openssl {}` failed: {}: {}",
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_name_the_usage_and_only_given_names() {
        assert_eq!(
            extensions(Usage::Server(&["IP:127.0.0.1", "DNS:localhost"])),
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
        );
        assert!(!extensions(Usage::Server(&[])).contains("subjectAltName"));
        assert!(extensions(Usage::Client).ends_with("extendedKeyUsage=clientAuth\n"));
    }
}

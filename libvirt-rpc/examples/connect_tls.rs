//! Connect to a remote libvirtd over TLS with your client certificate and
//! list its domains with their states — what
//! `virsh -c qemu+tls://host/system list --all` shows.
//!
//! ```text
//! cargo run -p libvirt-rpc --features tls --example connect_tls -- 'qemu+tls://host.example.org/system'
//! ```
//!
//! The daemon listens with `listen_tls` (port 16514). Your credentials are
//! where libvirt's own client looks: the directory of a `pkipath=DIR` URI
//! parameter (`DIR/cacert.pem`, `DIR/clientcert.pem`, `DIR/clientkey.pem`),
//! else `~/.pki/libvirt/` (when not root), else `/etc/pki/CA/cacert.pem`,
//! `/etc/pki/libvirt/clientcert.pem` and
//! `/etc/pki/libvirt/private/clientkey.pem`. The daemon's certificate must
//! name the URI's host in its subjectAltName.
//!
//! When it fails, it says which side to fix: your files, the daemon's
//! certificate, or the daemon's view of yours.

use std::process::ExitCode;

use libvirt_rpc::{Client, ConnectOptions, Error, ListDomainsFlags, NoFlags, Uri};

/// One line per domain: name, id (-1 when inactive) and state.
pub async fn list_domains(uri: &str) -> Result<Vec<String>, Error> {
    let uri: Uri = uri.parse()?;
    let client = Client::connect_uri(&uri, &ConnectOptions::new()).await?;
    let mut lines = Vec::new();
    for dom in client
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await?
    {
        let state = client.domain_get_state(&dom, NoFlags::empty()).await?;
        lines.push(format!("{:<24} {:>4}  {:?}", dom.name, dom.id, state.state));
    }
    client.close().await;
    Ok(lines)
}

/// What to fix, for the errors a TLS connection can end with.
pub fn hint(e: &Error) -> &'static str {
    match e {
        Error::TlsCredentials { .. } => {
            "check your CA, client certificate and key files (pkipath=DIR or the defaults)"
        }
        Error::TlsServerCertificate { .. } => {
            "the daemon's certificate is not signed by your CA or does not name this host"
        }
        Error::TlsRefused { .. } => {
            "the daemon refused your certificate: signed by its CA? in its tls_allowed_dn_list?"
        }
        Error::TlsTimeout { .. } | Error::TlsHandshake { .. } => {
            "is this libvirtd's TLS port (listen_tls, 16514)?"
        }
        Error::Disconnected(_) => "the daemon cannot be reached",
        _ => "",
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let uri = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "qemu+tls://localhost/system".to_owned());
    match list_domains(&uri).await {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            // The whole chain: each layer says its own part.
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{uri}: {text}");
            let hint = hint(&e);
            if !hint.is_empty() {
                eprintln!("hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

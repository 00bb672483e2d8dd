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

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use libvirt_rpc::{Client, ConnectOptions, ListDomainsFlags, NoFlags, Uri};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("connect_tls: {}", chain(e.as_ref()));
            if let Some(hint) = e.downcast_ref::<libvirt_rpc::Error>().and_then(hint) {
                eprintln!("hint: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

/// Lists the domains of the TLS host `args` names (default
/// `qemu+tls://localhost/system`), one line per domain (name, id or -1,
/// state), writing to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let uri: Uri = match args {
        [] => "qemu+tls://localhost/system".parse()?,
        [uri] => uri.parse()?,
        _ => return Err("usage: connect_tls [URI]".into()),
    };
    // `+tls` (or a host without a transport): TLS with the files of
    // `pkipath` or libvirt's defaults, the daemon's confirmation read.
    let client = Client::connect_uri(&uri, &ConnectOptions::new()).await?;
    for dom in client
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await?
    {
        let state = client.domain_get_state(&dom, NoFlags::empty()).await?;
        writeln!(out, "{:<24} {:>4}  {:?}", dom.name, dom.id, state.state)?;
    }
    client.close().await;
    Ok(())
}

/// What to fix, for the errors a TLS connection can end with.
pub fn hint(e: &libvirt_rpc::Error) -> Option<&'static str> {
    use libvirt_rpc::Error as E;
    Some(match e {
        E::TlsCredentials { .. } => {
            "check your CA, client certificate and key files (pkipath=DIR or the defaults)"
        }
        E::TlsServerCertificate { .. } => {
            "the daemon's certificate is not signed by your CA or does not name this host"
        }
        E::TlsRefused { .. } => {
            "the daemon refused your certificate: signed by its CA? in its tls_allowed_dn_list?"
        }
        E::TlsTimeout { .. } | E::TlsHandshake { .. } => {
            "is this libvirtd's TLS port (listen_tls, 16514)?"
        }
        E::Disconnected(_) => "the daemon cannot be reached",
        _ => return None,
    })
}

/// An error and its sources, each said once (every layer's message is its
/// own).
fn chain(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

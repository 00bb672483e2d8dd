//! List the domains of a libvirt connection with their state.
//!
//! ```text
//! cargo run --example list_domains -- [URI]
//! ```
//!
//! `URI` is a connection URI (default `qemu:///system`). For a local one
//! the daemon's socket is found by libvirt's rules (`virtqemud-sock` or
//! `libvirt-sock`, system or per-user), or named with `?socket=PATH`
//! (`test:///default?socket=/run/libvirt/libvirt-sock`). One line per
//! domain, active ones first:
//!
//! ```text
//! test                 Running(Booted)           id 1
//! staging-db           Shutoff(Shutdown)         inactive
//! ```

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
            eprintln!("list_domains: {}", chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Lists the domains of the connection `args` names, writing to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let uri = match args {
        [] => "qemu:///system",
        [uri] => uri.as_str(),
        _ => return Err("usage: list_domains [URI]".into()),
    };
    let client = connect(uri).await?;
    let mut domains = client
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await?;
    // Active domains (those with an id) first, then by name.
    domains.sort_by_key(|d| (d.id < 0, d.name.clone()));
    for dom in &domains {
        let state = client.domain_get_state(dom, NoFlags::empty()).await?;
        let id = if dom.id >= 0 {
            format!("id {}", dom.id)
        } else {
            "inactive".to_owned()
        };
        let state = format!("{:?}", state.state_reason());
        writeln!(out, "{:<20} {state:<25} {id}", dom.name)?;
    }
    client.close().await;
    Ok(())
}

/// Connects to the daemon `uri` names (`Client::connect_uri`: a local
/// socket, `+tcp`, or `+tls` with the `tls` feature).
async fn connect(uri: &str) -> Result<Client, Box<dyn Error>> {
    let uri: Uri = uri.parse()?;
    Ok(Client::connect_uri(&uri, &ConnectOptions::new()).await?)
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

//! Watch domain lifecycle events (defined, started, stopped, ...) until
//! Ctrl-C or until the connection dies.
//!
//! ```text
//! cargo run --example watch_events -- [URI]
//! ```
//!
//! `URI` is a connection URI (default `qemu:///system`; `?socket=PATH`
//! names a local daemon's socket). One line per event:
//!
//! ```text
//! watching lifecycle events of qemu:///system (Ctrl-C to stop)
//! web                  Started      detail 0
//! web                  Stopped      detail 0
//! ```
//!
//! Events the program is too slow to take are dropped by the client and
//! counted, never queued without bound; the count is printed when it grows.

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use futures::StreamExt;
use libvirt_rpc::{Client, ConnectOptions, Uri};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stdout = std::io::stdout();
    tokio::select! {
        r = run(&args, &mut stdout) => match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("watch_events: {}", chain(e.as_ref()));
                ExitCode::FAILURE
            }
        },
        // Dropping `run` drops its client: the connection closes.
        _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
    }
}

/// Prints the lifecycle events of the connection `args` names to `out`
/// until the connection dies.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let uri = match args {
        [] => "qemu:///system",
        [uri] => uri.as_str(),
        _ => return Err("usage: watch_events [URI]".into()),
    };
    let client = connect(uri).await?;
    // `None`: every domain's events; `Some(&dom)` for one domain's.
    let mut events = client.subscribe_lifecycle(None).await?;
    writeln!(out, "watching lifecycle events of {uri} (Ctrl-C to stop)")?;
    out.flush()?;
    let mut missed = 0;
    // A subscription is a `futures::Stream` (and has `recv` for those who
    // do not use the trait): combinators such as `filter`, `take` or
    // `select` apply.
    while let Some(ev) = events.next().await {
        writeln!(
            out,
            "{:<20} {:<12} detail {}",
            ev.dom.name,
            format!("{:?}", ev.event),
            ev.detail
        )?;
        if events.missed() > missed {
            missed = events.missed();
            writeln!(out, "({missed} events dropped: this program fell behind)")?;
        }
        out.flush()?;
    }
    // The subscription ends with the connection.
    let reason = events
        .end_reason()
        .map_or_else(|| "unknown".to_owned(), |r| r.to_string());
    Err(format!("connection lost: {reason}").into())
}

/// Connects to the daemon `uri` names (`Client::connect_uri`: a local
/// socket, `+tcp`, or `+tls` with the `tls` feature).
async fn connect(uri: &str) -> Result<Client, Box<dyn Error>> {
    let uri: Uri = uri.parse()?;
    Ok(Client::connect_uri(&uri, &ConnectOptions::new()).await?)
}

/// An error and its sources, each said once.
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

//! Watch domain lifecycle events across daemon restarts: a `Reconnecting`
//! client redials with backoff when the link dies, registers the
//! subscription again, and says that events in between were missed.
//!
//! ```text
//! cargo run --example reconnect -- [URI]
//! ```
//!
//! `URI` is a connection URI (default `qemu:///system`; `?socket=PATH`
//! names a local daemon's socket). Restart libvirtd while it runs:
//!
//! ```text
//! watching lifecycle events of qemu:///system across reconnects (Ctrl-C to stop)
//! web                  Started
//! reconnected (link 1): events in between were missed; read the state again
//! web                  Stopped
//! ```

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use libvirt_rpc::{
    Client, ConnectOptions, DomainEventId, Event, EventTarget, ReconnectPolicy, Reconnecting,
    Resumed, Uri,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut stdout = std::io::stdout();
    tokio::select! {
        r = run(&args, &mut stdout) => match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("reconnect: {e}");
                ExitCode::FAILURE
            }
        },
        _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
    }
}

/// Prints the lifecycle events of the daemon `args` names to `out`, and a
/// line for each reconnect, until the first dial fails.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let uri: Uri = match args {
        [] => "qemu:///system".parse()?,
        [uri] => uri.parse()?,
        _ => return Err("usage: reconnect [URI]".into()),
    };
    let dial = {
        let uri = uri.clone();
        move || {
            let uri = uri.clone();
            async move { Client::connect_uri(&uri, &ConnectOptions::new()).await }
        }
    };
    // 100 ms before the first redial, doubling up to 10 s.
    let libvirt = Reconnecting::connect(dial, ReconnectPolicy::default()).await?;
    let mut events = libvirt
        .subscribe(EventTarget::all(DomainEventId::Lifecycle))
        .await?;
    writeln!(
        out,
        "watching lifecycle events of {uri} across reconnects (Ctrl-C to stop)"
    )?;
    out.flush()?;
    while let Some(item) = events.recv().await {
        match item {
            Resumed::Event(Event::Lifecycle(ev)) => {
                writeln!(out, "{:<20} {:?}", ev.dom.name, ev.event)?;
            }
            Resumed::Event(_) => {}
            Resumed::Gap { generation } => writeln!(
                out,
                "reconnected (link {generation}): events in between were missed; read the state again"
            )?,
        }
        out.flush()?;
    }
    Ok(())
}

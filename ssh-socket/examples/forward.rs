//! Forward a remote unix socket to a local one over SSH — what
//! `ssh -N -L LOCAL:REMOTE HOST` does — with `HOST` read from your OpenSSH
//! client config as `ssh HOST` reads it: its `HostName`, `User`, `Port`,
//! `IdentityFile`s (else your ssh-agent, else the default keys),
//! `ProxyJump` bastions and `UserKnownHostsFile` (plain, hashed and
//! `@cert-authority` lines).
//!
//! ```text
//! cargo run -p ssh-socket --example forward -- [-F CONFIG] HOST REMOTE_SOCKET LOCAL_SOCKET
//! # e.g. libvirt on hv1, behind the bastion your ~/.ssh/config names:
//! cargo run -p ssh-socket --example forward -- hv1 /var/run/libvirt/libvirt-sock /tmp/hv1.sock
//! virsh -c 'qemu+unix:///system?socket=/tmp/hv1.sock' list
//! ```
//!
//! The link is checked once before `LOCAL_SOCKET` is created (a wrong key
//! or host key fails at once, saying it will not pass by itself); then
//! each local connection gets an SSH connection of its own. Ctrl-C stops
//! it and removes `LOCAL_SOCKET`.

use std::error::Error;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ssh_socket::UserConfig;
use tokio::net::UnixListener;
use tokio::task::JoinSet;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match run(&args, &mut std::io::stdout(), stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forward: {}", chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Forwards as `args` say until `stop` completes, writing what happens to
/// `out`.
pub async fn run(
    args: &[String],
    out: &mut dyn Write,
    stop: impl Future<Output = ()>,
) -> Result<(), Box<dyn Error>> {
    let (config_file, rest) = match args {
        [flag, file, rest @ ..] if flag == "-F" => (Some(file), rest),
        rest => (None, rest),
    };
    let [host, remote, local] = rest else {
        return Err("usage: forward [-F CONFIG] HOST REMOTE_SOCKET LOCAL_SOCKET".into());
    };
    let user_config = match config_file {
        Some(file) => UserConfig::load(file)?,
        None => UserConfig::load_default()?,
    };
    let config = user_config.ssh_config(host, remote.as_str())?;
    let route: Vec<String> = config
        .jumps
        .iter()
        .map(|j| format!("{}@{}:{}", j.user, j.host, j.port))
        .chain([format!("{}@{}:{}", config.user, config.host, config.port)])
        .collect();

    // Check the whole path once, so a bad key or host key says so now.
    match ssh_socket::dial(&config).await {
        Ok(socket) => socket.close(),
        Err(e) if e.is_permanent() => {
            return Err(format!("{e} (fix the configuration: retrying will not help)").into());
        }
        Err(e) => return Err(e.into()),
    }
    let local = PathBuf::from(local);
    let listener = UnixListener::bind(&local)?;
    writeln!(
        out,
        "forwarding {} -> {remote} via {}",
        local.display(),
        route.join(" -> ")
    )?;
    out.flush()?;

    // Every connection's task is owned here and ends with `run`.
    let mut connections = JoinSet::new();
    tokio::pin!(stop);
    let mut served = 0u64;
    let result = loop {
        tokio::select! {
            () = &mut stop => break Ok(()),
            accepted = listener.accept() => {
                let (mut client, _) = match accepted {
                    Ok(pair) => pair,
                    Err(e) => break Err(e.into()),
                };
                served += 1;
                let n = served;
                let config = config.clone();
                connections.spawn(async move {
                    let mut ssh = match ssh_socket::dial(&config).await {
                        Ok(ssh) => ssh,
                        Err(e) => return format!("connection {n}: dial failed: {e}"),
                    };
                    match tokio::io::copy_bidirectional(&mut client, &mut ssh).await {
                        Ok((up, down)) => format!("connection {n}: closed ({up} bytes out, {down} back)"),
                        Err(e) => format!("connection {n}: ended: {e}"),
                    }
                });
            }
            Some(done) = connections.join_next() => {
                if let Ok(line) = done {
                    writeln!(out, "{line}")?;
                    out.flush()?;
                }
            }
        }
    };
    connections.shutdown().await;
    let _ = std::fs::remove_file(&local);
    result
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

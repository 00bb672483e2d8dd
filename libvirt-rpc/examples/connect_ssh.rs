//! Connect to a remote libvirtd over SSH from a `qemu+ssh://` URI and
//! print what the host runs — what `virsh -c qemu+ssh://root@host/system
//! list --all` does, without OpenSSH or libvirt's C library.
//!
//! ```text
//! cargo run -p libvirt-rpc --example connect_ssh -- \
//!     'qemu+ssh://root@host.example.org/system?keyfile=/home/me/.ssh/id_ed25519'
//! ```
//!
//! libvirt-rpc has no SSH client of its own (`Client::connect_uri` answers
//! `Error::UnsupportedTransport` for SSH URIs); this is how the two crates
//! compose. The workspace's `ssh-socket` dials with the URI's user, host,
//! port, `keyfile` (default `~/.ssh/id_ed25519`) and `known_hosts`
//! (default `~/.ssh/known_hosts`; the host must be in it) parameters and
//! forwards the daemon socket `Uri::remote_socket` names (the `socket`
//! parameter, else `/var/run/libvirt/libvirt-sock`); `Client::connect`
//! then speaks libvirt through it and opens `Uri::name`.

use std::error::Error;
use std::io::Write;
use std::path::PathBuf;

use libvirt_rpc::{Client, Config, ListDomainsFlags, OpenFlags, Uri};
use ssh_socket::{HostKeyPolicy, SshConfig};

/// `ssh-socket`'s settings for an SSH URI.
pub fn ssh_config(uri: &Uri, flags: OpenFlags) -> Result<SshConfig, Box<dyn Error>> {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or("HOME is not set")
    };
    let user = match uri.user() {
        Some(user) => user.to_owned(),
        None => std::env::var("USER").map_err(|_| "no user in the URI and USER is not set")?,
    };
    let key = match uri.keyfile() {
        Some(key) => key.to_owned(),
        None => home()?.join(".ssh/id_ed25519"),
    };
    let known_hosts = match uri.param("known_hosts") {
        Some(path) => PathBuf::from(path),
        None => home()?.join(".ssh/known_hosts"),
    };
    let socket = uri.remote_socket(flags)?;
    let socket = socket.to_str().ok_or("the socket path is not UTF-8")?;
    Ok(SshConfig::new(
        uri.host().unwrap_or("localhost"),
        user,
        key,
        HostKeyPolicy::KnownHosts(known_hosts),
        socket,
    )
    .with_port(uri.port_or_default().unwrap_or(22)))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("connect_ssh: {}", chain(e.as_ref()));
            std::process::ExitCode::FAILURE
        }
    }
}

/// Connects through SSH to the host of the `qemu+ssh://` URI in `args` and
/// writes its name, libvirt's version and one line per domain to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let [uri] = args else {
        return Err("usage: connect_ssh 'qemu+ssh://user@host/system?keyfile=...'".into());
    };
    let uri: Uri = uri.parse()?;
    let flags = OpenFlags::empty();
    let socket = ssh_socket::dial(&ssh_config(&uri, flags)?).await?;
    let ssh = socket.closer();
    let client = Client::connect(socket, &uri.name(), flags, Config::default()).await?;
    writeln!(
        out,
        "{} runs libvirt {}",
        client.connect_get_hostname().await?,
        client.connect_get_lib_version().await?
    )?;
    for dom in client
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await?
    {
        writeln!(out, "{:<24} {:>4}", dom.name, dom.id)?;
    }
    client.close().await;
    // Closing the client drops the SSH socket; this ends the SSH session
    // at once too (it never blocks).
    ssh.close();
    Ok(())
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

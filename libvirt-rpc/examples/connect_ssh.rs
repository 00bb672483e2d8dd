//! Connect to a remote libvirtd over SSH from a `qemu+ssh://` URI and
//! print what the host runs — what `virsh -c qemu+ssh://root@host/system
//! list --all` does, without OpenSSH or libvirt's C library.
//!
//! ```text
//! cargo run -p libvirt-rpc --features ssh --example connect_ssh -- \
//!     'qemu+ssh://root@host.example.org/system?keyfile=/home/me/.ssh/id_ed25519'
//! ```
//!
//! With the `ssh` feature, `Client::connect_uri` dials SSH URIs itself:
//! the URI's user (else `$USER`), host and port; its `keyfile` (else the
//! ssh-agent of `$SSH_AUTH_SOCK`, else `~/.ssh/id_rsa`, `id_ecdsa`,
//! `id_ed25519` in turn); its `known_hosts` (else `~/.ssh/known_hosts`; the host must
//! be in it); and it forwards the daemon socket `Uri::remote_socket`
//! names (`socket=`, else `/var/run/libvirt/libvirt-sock`). A `jump=`
//! argument after the URI (`user@bastion:port,key=/path`) goes through a
//! bastion first, as `ssh -J` does, checked against the same known_hosts.

use std::error::Error;
use std::io::Write;

use libvirt_rpc::ssh_socket::{HostKeyPolicy, JumpHost};
use libvirt_rpc::{Client, ConnectOptions, ListDomainsFlags, Uri};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("connect_ssh: {}", chain(e.as_ref()));
            if let Some(e) = e.downcast_ref::<libvirt_rpc::Error>() {
                if !e.is_transient() {
                    eprintln!("connect_ssh: this will fail again until the setup is fixed");
                }
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// Connects through SSH to the host of the `qemu+ssh://` URI in `args`
/// (optionally through the `jump=` bastion) and writes its name, libvirt's
/// version and one line per domain to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    const USAGE: &str = "usage: connect_ssh 'qemu+ssh://user@host/system?keyfile=...' [jump=user@host:port,key=/path]";
    let (uri, jump) = match args {
        [uri] => (uri, None),
        [uri, jump] => (uri, Some(jump_host(jump).ok_or(USAGE)?)),
        _ => return Err(USAGE.into()),
    };
    let uri: Uri = uri.parse()?;
    let mut options = ConnectOptions::new();
    if let Some(jump) = jump {
        let known_hosts = uri
            .param("known_hosts")
            .ok_or("jump= needs known_hosts= in the URI")?;
        options = options.ssh_jump(
            JumpHost::new(
                jump.host,
                jump.user,
                jump.key,
                HostKeyPolicy::KnownHosts(known_hosts.into()),
            )
            .with_port(jump.port),
        );
    }
    let client = Client::connect_uri(&uri, &options).await?;
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
    // Ends the SSH session too, at once (it never blocks).
    client.close().await;
    Ok(())
}

/// A `jump=user@host:port,key=/path` argument.
struct Jump {
    user: String,
    host: String,
    port: u16,
    key: String,
}

fn jump_host(arg: &str) -> Option<Jump> {
    let (login, key) = arg.strip_prefix("jump=")?.split_once(",key=")?;
    let (user, address) = login.split_once('@')?;
    let (host, port) = address.rsplit_once(':')?;
    Some(Jump {
        user: user.to_owned(),
        host: host.to_owned(),
        port: port.parse().ok()?,
        key: key.to_owned(),
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

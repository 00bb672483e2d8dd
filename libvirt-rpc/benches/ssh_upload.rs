//! `cargo xtask bench libvirt-rpc`: a 256 MiB volume upload to the sandbox
//! hypervisor through a jump host (a bastion sshd of the bench's own), by
//! this crate's `qemu+ssh://` URI with `ConnectOptions::ssh_jump` (russh in
//! process, through `ssh-socket`) against OpenSSH's `ssh -J` forwarding the
//! daemon's socket (`-L`, the jump written out as the `ssh -W` ProxyCommand
//! `-J` runs, so both use the same keys and known_hosts) with this crate
//! uploading over the forwarded socket — the same cipher
//! (aes256-gcm@openssh.com) on both hops, the same upload code, so the
//! ratio compares the SSH paths. Each round is timed from the start of the
//! connection (the `ssh` process's start for OpenSSH) to the daemon's
//! confirmation; the side that goes first alternates. Prints figures and
//! the median ratio; asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libvirt_rpc::ssh_socket::{HostKeyPolicy, JumpHost};
use libvirt_rpc::{
    Client, Config, ConnectOptions, OpenFlags, StorageVolCreateFlags, StorageVolDeleteFlags,
    StorageVolStreamFlags, Uri,
};
use testkit::Descriptor;
use testkit::bench::median;
use testkit::sshd::OwnSshd;

const UPLOAD: u64 = 256 << 20;
const ROUNDS: usize = 5;
const GCM: &str = "aes256-gcm@openssh.com";

/// Uploads the file `src` into the new volume `name` over `client`, then
/// closes it.
async fn upload(client: Client, pool: &str, name: &str, src: &Path) {
    let p = client.storage_pool_lookup_by_name(pool).await.unwrap();
    let v = client.storage_vol_lookup_by_name(&p, name).await.unwrap();
    let file = tokio::fs::File::open(src).await.unwrap();
    client
        .storage_vol_upload(&v, 0, UPLOAD, StorageVolStreamFlags::empty(), file)
        .await
        .unwrap();
    client.close().await;
}

/// Ours: the URI and the bastion as options.
async fn ours(d: &Descriptor, bastion: &OwnSshd, name: &str, src: &Path) -> Duration {
    let uri: Uri = format!(
        "qemu+ssh://{}@{}:{}/system?keyfile={}&known_hosts={}&socket={}",
        d.ssh.user,
        d.ssh.host,
        d.ssh.port,
        d.ssh.key_path.display(),
        d.ssh.known_hosts_path.display(),
        d.remote_socket.display()
    )
    .parse()
    .unwrap();
    let options = ConnectOptions::new().ssh_jump(
        JumpHost::new(
            "127.0.0.1",
            bastion.user.clone(),
            bastion.client_key.clone(),
            HostKeyPolicy::KnownHosts(bastion.known_hosts.clone()),
        )
        .with_port(bastion.port),
    );
    let t0 = Instant::now();
    let client = Client::connect_uri(&uri, &options).await.unwrap();
    upload(client, &d.pool.name, name, src).await;
    t0.elapsed()
}

/// OpenSSH: `ssh -J` forwarding the daemon's socket to `local`, this
/// crate uploading through it.
async fn openssh(
    d: &Descriptor,
    bastion: &OwnSshd,
    local: &Path,
    name: &str,
    src: &Path,
) -> Duration {
    let _ = std::fs::remove_file(local);
    let t0 = Instant::now();
    let mut child = Command::new("ssh")
        .args(["-c", GCM, "-N", "-o", "BatchMode=yes"])
        .args([
            "-o",
            "ExitOnForwardFailure=yes",
            "-o",
            "StrictHostKeyChecking=yes",
        ])
        .arg("-o")
        .arg(format!(
            "ProxyCommand=ssh -c {GCM} -o BatchMode=yes -o StrictHostKeyChecking=yes \
             -o UserKnownHostsFile={} -i {} -p {} -W %h:%p {}@127.0.0.1",
            bastion.known_hosts.display(),
            bastion.client_key.display(),
            bastion.port,
            bastion.user
        ))
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            d.ssh.known_hosts_path.display()
        ))
        .arg("-i")
        .arg(&d.ssh.key_path)
        .args(["-p", &d.ssh.port.to_string()])
        .arg("-L")
        .arg(format!("{}:{}", local.display(), d.remote_socket.display()))
        .arg(format!("{}@{}", d.ssh.user, d.ssh.host))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let client = loop {
        if local.exists() {
            if let Ok(c) = Client::connect_unix(
                local,
                "qemu:///system",
                OpenFlags::empty(),
                Config::default(),
            )
            .await
            {
                break c;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "ssh -L never listened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    upload(client, &d.pool.name, name, src).await;
    let elapsed = t0.elapsed();
    let _ = child.kill();
    let _ = child.wait();
    elapsed
}

fn mib_s(t: Duration) -> f64 {
    UPLOAD as f64 / f64::from(1 << 20) / t.as_secs_f64()
}

fn main() {
    let d = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    std::fs::write(&src, testkit::bytes::pseudo_random(UPLOAD as usize, 29)).unwrap();
    let local = dir.path().join("forwarded.sock");
    let rt = testkit::bench::runtime();
    rt.block_on(async {
        let admin = Client::connect_unix(
            &d.libvirt.socket,
            "qemu:///system",
            OpenFlags::empty(),
            Config::default(),
        )
        .await
        .unwrap();
        let pool = admin.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
        let bastion = OwnSshd::start("");
        let (mut ours_rates, mut theirs_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (mut t_ours, mut t_theirs) = (Duration::ZERO, Duration::ZERO);
            for side in [round % 2, 1 - round % 2] {
                let name = format!("lvrpc-jump-{side}-{}", std::process::id());
                let xml = format!(
                    "<volume><name>{name}</name><capacity unit='bytes'>{UPLOAD}</capacity>\
                     <target><format type='raw'/></target></volume>"
                );
                let vol = admin
                    .storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
                    .await
                    .unwrap();
                if side == 0 {
                    t_ours = ours(&d, &bastion, &name, &src).await;
                } else {
                    t_theirs = openssh(&d, &bastion, &local, &name, &src).await;
                }
                admin
                    .storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
                    .await
                    .unwrap();
            }
            ours_rates.push(mib_s(t_ours));
            theirs_rates.push(mib_s(t_theirs));
            ratios.push(t_theirs.as_secs_f64() / t_ours.as_secs_f64());
            eprintln!(
                "  round {round}: qemu+ssh via jump {:.0} MiB/s, ssh -J forward {:.0} MiB/s, ratio {:.2}",
                ours_rates[round], theirs_rates[round], ratios[round]
            );
        }
        println!(
            "volume upload 256 MiB through a jump host (aes256-gcm both hops), medians of {ROUNDS} rounds: \
             qemu+ssh with ssh_jump {:.0} MiB/s, OpenSSH ssh -J forwarding {:.0} MiB/s, ratio {:.2}x",
            median(&ours_rates),
            median(&theirs_rates),
            median(&ratios)
        );
        admin.close().await;
    });
}

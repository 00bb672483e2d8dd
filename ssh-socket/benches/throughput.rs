//! 256 MiB through a forwarded unix socket into a sink on the sandbox host:
//! ssh-socket against OpenSSH's own `ssh -N -L local.sock:remote.sock`, in
//! the same run — directly, and through a jump host (an sshd of the
//! bench's own: ssh-socket's `JumpHost` against OpenSSH's `ProxyJump`,
//! written out as the `ssh -W` ProxyCommand it stands for so both use the
//! same keys and known_hosts, the same cipher on both hops). Prints
//! throughput, the ratio, and client-side CPU time per GiB for both.
//!
//! CPU accounting: the sink runs on a thread of its own whose CPU time is
//! subtracted. For ssh-socket, the client side is this process (the SSH
//! client). For OpenSSH it is the `ssh` process (and, through the jump
//! host, its `ssh -W` child) plus this process feeding the local socket. sshd's side is the same program in both runs and is
//! not counted.
//!
//! Run with `cargo xtask bench ssh-socket`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ssh_socket::{HostKeyPolicy, JumpHost, SshConfig};
use testkit::sshd::OwnSshd;
use tokio::io::AsyncWriteExt;

const TOTAL: u64 = 256 * 1024 * 1024;
const CHUNK: usize = 256 * 1024;
const ROUNDS: usize = 5;
const GCM: &str = "aes256-gcm@openssh.com";

/// CPU time (user + system) from a `/proc/.../stat` file.
fn cpu_of(stat_path: &str) -> Duration {
    let text = std::fs::read_to_string(stat_path).unwrap_or_default();
    // Fields after the command name (which is in parentheses).
    let rest = text.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 (1-based) of the whole line,
    // i.e. indexes 11 and 12 after the name.
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10) // CLK_TCK = 100 on Linux
}

/// A sink on a unix socket. Each connection's byte count and the sink
/// thread's cumulative CPU time go back over `done`.
fn start_sink(path: &Path) -> mpsc::Receiver<(u64, Duration)> {
    let listener = UnixListener::bind(path).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 1024 * 1024];
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut n = 0u64;
            while let Ok(k) = conn.read(&mut buf) {
                if k == 0 {
                    break;
                }
                n += k as u64;
            }
            if tx.send((n, cpu_of("/proc/thread-self/stat"))).is_err() {
                return;
            }
        }
    });
    rx
}

struct Run {
    elapsed: Duration,
    client_cpu: Duration,
    ssh_cpu: Duration,
}

async fn feed<W: tokio::io::AsyncWrite + Unpin>(mut w: W) -> W {
    let buf = vec![0xa5u8; CHUNK];
    let mut left = TOTAL;
    while left > 0 {
        let n = left.min(CHUNK as u64) as usize;
        w.write_all(&buf[..n]).await.unwrap();
        left -= n as u64;
    }
    w.shutdown().await.unwrap();
    // The caller keeps the writer until the sink has everything.
    w
}

fn wait_sink(done: &mpsc::Receiver<(u64, Duration)>) -> Duration {
    let (n, sink_cpu) = done.recv_timeout(Duration::from_secs(300)).unwrap();
    assert_eq!(n, TOTAL, "sink got {n} bytes");
    sink_cpu
}

async fn run_ours(
    config: &SshConfig,
    done: &mpsc::Receiver<(u64, Duration)>,
    sink_cpu0: Duration,
) -> (Run, Duration) {
    let socket = ssh_socket::dial(config).await.unwrap();
    let closer = socket.closer();
    let cpu0 = cpu_of("/proc/self/stat");
    let t = Instant::now();
    let (r, w) = tokio::io::split(socket);
    let w = feed(w).await;
    let sink_cpu = tokio::task::block_in_place(|| wait_sink(done));
    let elapsed = t.elapsed();
    let cpu = cpu_of("/proc/self/stat").saturating_sub(cpu0);
    drop((r, w));
    closer.close();
    closer.torn_down().await;
    let client_cpu = cpu.saturating_sub(sink_cpu.saturating_sub(sink_cpu0));
    (
        Run {
            elapsed,
            client_cpu,
            ssh_cpu: Duration::ZERO,
        },
        sink_cpu,
    )
}

async fn run_openssh(
    d: &testkit::Descriptor,
    remote: &Path,
    local: &Path,
    done: &mpsc::Receiver<(u64, Duration)>,
    sink_cpu0: Duration,
    cipher: Option<&str>,
    jump: Option<&OwnSshd>,
) -> (Run, Duration) {
    let _ = std::fs::remove_file(local);
    let mut command = Command::new("ssh");
    if let Some(cipher) = cipher {
        command.args(["-c", cipher]);
    }
    if let Some(bastion) = jump {
        // What `-J` runs, with the bastion's own key and known_hosts.
        command.arg("-o").arg(format!(
            "ProxyCommand=ssh -c {} -o BatchMode=yes -o StrictHostKeyChecking=yes \
             -o UserKnownHostsFile={} -i {} -p {} -W %h:%p {}@127.0.0.1",
            cipher.unwrap_or(GCM),
            bastion.known_hosts.display(),
            bastion.client_key.display(),
            bastion.port,
            bastion.user
        ));
    }
    let mut child = command
        .args([
            "-N",
            "-o",
            "BatchMode=yes",
            "-o",
            "ExitOnForwardFailure=yes",
        ])
        .args([
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "StreamLocalBindUnlink=yes",
        ])
        .arg("-o")
        .arg(format!(
            "UserKnownHostsFile={}",
            d.ssh.known_hosts_path.display()
        ))
        .arg("-i")
        .arg(&d.ssh.key_path)
        .args(["-p", &d.ssh.port.to_string()])
        .arg("-L")
        .arg(format!("{}:{}", local.display(), remote.display()))
        .arg(format!("{}@{}", d.ssh.user, d.ssh.host))
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let stream = loop {
        if let Ok(s) = tokio::net::UnixStream::connect(local).await {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "ssh -L never listened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let ssh_stat = format!("/proc/{}/stat", child.id());
    // The ProxyCommand's `ssh -W`, a child of ssh.
    let proxy_stat = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id()))
        .ok()
        .and_then(|c| {
            c.split_whitespace()
                .next()
                .map(|p| format!("/proc/{p}/stat"))
        });
    let proxy_cpu = || proxy_stat.as_deref().map_or(Duration::ZERO, cpu_of);
    let ssh0 = cpu_of(&ssh_stat) + proxy_cpu();
    let cpu0 = cpu_of("/proc/self/stat");
    let t = Instant::now();
    let stream = feed(stream).await;
    let sink_cpu = tokio::task::block_in_place(|| wait_sink(done));
    let elapsed = t.elapsed();
    let cpu = cpu_of("/proc/self/stat").saturating_sub(cpu0);
    let ssh_cpu = (cpu_of(&ssh_stat) + proxy_cpu()).saturating_sub(ssh0);
    drop(stream);
    let _ = child.kill();
    let _ = child.wait();
    let client_cpu = cpu.saturating_sub(sink_cpu.saturating_sub(sink_cpu0));
    (
        Run {
            elapsed,
            client_cpu,
            ssh_cpu,
        },
        sink_cpu,
    )
}

fn gib_per_s(r: &Run) -> f64 {
    TOTAL as f64 / r.elapsed.as_secs_f64() / f64::from(1u32 << 30)
}

fn cpu_per_gib(r: &Run) -> Duration {
    (r.client_cpu + r.ssh_cpu).mul_f64(f64::from(1u32 << 30) / TOTAL as f64)
}

fn median(mut v: Vec<Run>) -> Run {
    v.sort_by_key(|r| r.elapsed);
    v.swap_remove(v.len() / 2)
}

fn main() {
    let d = testkit::Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    let remote: PathBuf = dir.path().join("sink.sock");
    let local: PathBuf = dir.path().join("local.sock");
    let done = start_sink(&remote);
    let config = SshConfig::new(
        d.ssh.host.clone(),
        d.ssh.user.clone(),
        d.ssh.key_path.clone(),
        HostKeyPolicy::KnownHosts(d.ssh.known_hosts_path.clone()),
        remote.to_str().unwrap(),
    )
    .with_port(d.ssh.port);

    let rt = testkit::bench::runtime();
    rt.block_on(async {
        let mut sink_cpu = Duration::ZERO;
        let (mut ours, mut theirs, mut theirs_gcm) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (r, s) = run_ours(&config, &done, sink_cpu).await;
            sink_cpu = s;
            println!(
                "round {round}: ssh-socket          {:.3} GiB/s, client CPU {:?}",
                gib_per_s(&r),
                r.client_cpu
            );
            ours.push(r);
            for (cipher, runs) in [(None, &mut theirs), (Some(GCM), &mut theirs_gcm)] {
                let (r, s) = run_openssh(&d, &remote, &local, &done, sink_cpu, cipher, None).await;
                sink_cpu = s;
                println!(
                    "round {round}: openssh {:<11} {:.3} GiB/s, ssh CPU {:?} + feeder CPU {:?}",
                    if cipher.is_some() { "aes256-gcm" } else { "default" },
                    gib_per_s(&r),
                    r.ssh_cpu,
                    r.client_cpu
                );
                runs.push(r);
            }
        }
        let (ours, theirs, theirs_gcm) = (median(ours), median(theirs), median(theirs_gcm));
        println!("--- 256 MiB into a sink through a forwarded unix socket (median of {ROUNDS}) ---");
        println!(
            "ssh-socket (aes256-gcm):   {:.3} GiB/s in {:?}; client CPU per GiB {:?}",
            gib_per_s(&ours),
            ours.elapsed,
            cpu_per_gib(&ours)
        );
        for (name, theirs) in [("default cipher", &theirs), ("aes256-gcm", &theirs_gcm)] {
            println!(
                "openssh ({name}): {:.3} GiB/s in {:?}; client CPU per GiB {:?} (ssh {:?} + feeder {:?} per 256 MiB)",
                gib_per_s(theirs),
                theirs.elapsed,
                cpu_per_gib(theirs),
                theirs.ssh_cpu,
                theirs.client_cpu
            );
            println!(
                "ratio ssh-socket / openssh ({name}): throughput {:.2}x (goal >= 0.8x), CPU per GiB {:.2}x",
                gib_per_s(&ours) / gib_per_s(theirs),
                cpu_per_gib(&ours).as_secs_f64() / cpu_per_gib(theirs).as_secs_f64().max(1e-9)
            );
        }

        // Through a jump host: the bastion lets the sandbox key in too.
        let bastion = OwnSshd::start("");
        let jumped = config.clone().with_jump(
            JumpHost::new(
                "127.0.0.1",
                bastion.user.clone(),
                bastion.client_key.clone(),
                HostKeyPolicy::KnownHosts(bastion.known_hosts.clone()),
            )
            .with_port(bastion.port),
        );
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (r, s) = run_ours(&jumped, &done, sink_cpu).await;
            sink_cpu = s;
            println!(
                "round {round}: ssh-socket via jump  {:.3} GiB/s, client CPU {:?}",
                gib_per_s(&r),
                r.client_cpu
            );
            ours.push(r);
            let (r, s) =
                run_openssh(&d, &remote, &local, &done, sink_cpu, Some(GCM), Some(&bastion)).await;
            sink_cpu = s;
            println!(
                "round {round}: openssh via jump     {:.3} GiB/s, ssh CPU {:?} + feeder CPU {:?}",
                gib_per_s(&r),
                r.ssh_cpu,
                r.client_cpu
            );
            theirs.push(r);
        }
        let (ours, theirs) = (median(ours), median(theirs));
        println!("--- the same through a jump host, aes256-gcm on both hops (median of {ROUNDS}) ---");
        println!(
            "ssh-socket (JumpHost):       {:.3} GiB/s; client CPU per GiB {:?}",
            gib_per_s(&ours),
            cpu_per_gib(&ours)
        );
        println!(
            "openssh (ProxyJump, ssh -W): {:.3} GiB/s; client CPU per GiB {:?}",
            gib_per_s(&theirs),
            cpu_per_gib(&theirs)
        );
        println!(
            "ratio ssh-socket / openssh through a jump host: throughput {:.2}x, CPU per GiB {:.2}x",
            gib_per_s(&ours) / gib_per_s(&theirs),
            cpu_per_gib(&ours).as_secs_f64() / cpu_per_gib(&theirs).as_secs_f64().max(1e-9)
        );
    });
}

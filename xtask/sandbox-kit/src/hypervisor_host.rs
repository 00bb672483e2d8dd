//! The sandbox's hypervisor hosts, and what a test can do to one.
//!
//! Host 1 is the sandbox's own libvirtd and sshd on loopback (the
//! descriptor's top-level `libvirt`, `ssh` and `pool`). Hosts 2..=N
//! (`cargo xtask sandbox up --hosts N`) are each a host on a network: sshd
//! in a network namespace of its own (`kvm2-hK`), reached from the machine
//! over a veth pair at [`HypervisorHost::address`] port 22, and a libvirtd
//! with state directories of its own (`/etc`, `/run`, `/var/lib`,
//! `/var/cache` and `/var/log` `…/libvirt` bind-mounted from the host's run
//! directory in a private mount namespace, with its own virtlogd), its own
//! `dir` pool and host key. Every host's guests join the one guest network
//! ([`crate::GuestNet`]), as guests of hosts on one L2 segment do.
//!
//! A test can [`freeze`](HypervisorHost::freeze) a host (every process of it
//! stopped: sshd and its sessions, libvirtd, virtlogd, its QEMUs),
//! [`cut_off`](HypervisorHost::cut_off) its link (packets dropped both ways:
//! no FIN, no RST), or [`stop`](HypervisorHost::stop) it (power lost: its
//! processes and guests killed, its link down), and undo each. A test that
//! does must undo it (a guard's drop), or the sandbox counts as half-dead.

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::{LibvirtService, PoolInfo, SshService};

/// One hypervisor host of the sandbox.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HypervisorHost {
    /// `host1`, `host2`, … (what a providers config names it).
    pub name: String,
    /// Its libvirtd.
    pub libvirt: LibvirtService,
    /// Its sshd (`host` is the address the machine dials).
    pub ssh: SshService,
    /// libvirt's socket as seen from sshd (what `direct-streamlocal` opens).
    pub remote_socket: PathBuf,
    /// Its `dir` pool.
    pub pool: PoolInfo,
    /// Hosts 2..=N: how the host is reached and controlled. `None` for
    /// host 1 (loopback, shared with every other test: never frozen, cut
    /// off or stopped).
    pub network: Option<HostNetwork>,
}

/// How a networked host (2..=N) is reached and controlled.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostNetwork {
    /// The network namespace its sshd runs in (`kvm2-hK`).
    pub netns: String,
    /// The host's address (sshd listens on port 22).
    pub address: Ipv4Addr,
    /// The machine's address on the host's link.
    pub peer_address: Ipv4Addr,
    /// The link's name inside the namespace.
    pub link: String,
    /// Pid files of the host's daemons (sshd, virtlogd, libvirtd).
    pub pid_files: Vec<PathBuf>,
    /// Where its libvirtd keeps QEMU's pid files (`<run>/qemu`).
    pub qemu_run_dir: PathBuf,
    /// The commands that start the host's daemons (argv each, in order):
    /// what [`HypervisorHost::start`] runs again.
    pub start: Vec<Vec<String>>,
}

impl HypervisorHost {
    fn network(&self) -> io::Result<&HostNetwork> {
        self.network.as_ref().ok_or_else(|| {
            io::Error::other(format!(
                "{} is the sandbox's shared loopback host: only hosts 2..=N can be \
                 frozen, cut off or stopped (cargo xtask sandbox up --hosts N)",
                self.name
            ))
        })
    }

    /// A `qemu+unix` / `test+unix` URI for virsh on this host's socket.
    pub fn virsh_uri(&self, uri: &str) -> String {
        let (scheme, rest) = uri.split_once("://").unwrap_or((uri, "/"));
        format!(
            "{scheme}+unix://{rest}?socket={}",
            self.libvirt.socket.display()
        )
    }

    /// Stops every process of the host (SIGSTOP): sshd and its sessions,
    /// libvirtd, virtlogd, its QEMUs. Connections stay open and silent.
    ///
    /// # Errors
    /// Host 1, or `kill` failing.
    pub fn freeze(&self) -> io::Result<()> {
        signal(&self.pids()?, "-STOP")
    }

    /// Undoes [`freeze`](Self::freeze) (SIGCONT).
    ///
    /// # Errors
    /// As [`freeze`](Self::freeze).
    pub fn thaw(&self) -> io::Result<()> {
        signal(&self.pids()?, "-CONT")
    }

    /// Drops every packet between the host and the machine, both ways
    /// (nftables in the host's namespace and a table of the host's own in
    /// the machine's): senders see silence, no FIN and no RST.
    ///
    /// # Errors
    /// Host 1, or `nft` failing.
    pub fn cut_off(&self) -> io::Result<()> {
        let net = self.network()?;
        nft(
            Some(&net.netns),
            &format!(
                "table inet {CUT} {{\n chain input {{\n  type filter hook input priority -300;\n  \
                 iifname \"{}\" drop\n }}\n}}\n",
                net.link
            ),
        )?;
        nft(
            None,
            &format!(
                "table inet {} {{\n chain input {{\n  type filter hook input priority -300;\n  \
                 ip saddr {} drop\n }}\n}}\n",
                self.machine_table(),
                net.address
            ),
        )
    }

    /// Undoes [`cut_off`](Self::cut_off); a no-op on a link not cut.
    ///
    /// # Errors
    /// Host 1, or `nft` failing for another reason than a missing table.
    pub fn restore_link(&self) -> io::Result<()> {
        let net = self.network()?;
        delete_table(Some(&net.netns), CUT)?;
        delete_table(None, &self.machine_table())
    }

    /// Power lost: every process of the host and its guests killed
    /// (SIGKILL), its link down. [`start`](Self::start) boots it again.
    ///
    /// # Errors
    /// Host 1, or `kill` / `ip` failing.
    pub fn stop(&self) -> io::Result<()> {
        let net = self.network()?;
        signal(&self.pids()?, "-KILL")?;
        // SIGKILL is delivered, not awaited: wait (bounded) for the exits.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !self.pids()?.is_empty() {
            if std::time::Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{}: processes {:?} outlived SIGKILL by 10 s",
                    self.name,
                    self.pids()?
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for file in &net.pid_files {
            let _ = std::fs::remove_file(file);
        }
        run(Command::new("ip").args(["-n", &net.netns, "link", "set", &net.link, "down"]))
    }

    /// Boots a [`stop`](Self::stop)ped host: link up, then its daemons as
    /// `sandbox up` started them (its persistent domains come back shut
    /// off, as after a host's reboot). Returns once they were started;
    /// a caller waits for them to answer.
    ///
    /// # Errors
    /// Host 1, or a start command failing.
    pub fn start(&self) -> io::Result<()> {
        let net = self.network()?;
        run(Command::new("ip").args(["-n", &net.netns, "link", "set", &net.link, "up"]))?;
        for argv in &net.start {
            let (program, args) = argv
                .split_first()
                .ok_or_else(|| io::Error::other("an empty start command"))?;
            run(Command::new(program).args(args))?;
        }
        Ok(())
    }

    /// The pids of the host's daemons (from their pid files) and QEMUs
    /// that run.
    ///
    /// # Errors
    /// Host 1.
    pub fn pids(&self) -> io::Result<Vec<u32>> {
        let net = self.network()?;
        let mut pids: Vec<u32> = net.pid_files.iter().filter_map(|f| read_pid(f)).collect();
        // sshd's per-connection processes live in its namespace.
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &net.netns])
            .output()
        {
            pids.extend(
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        if let Ok(entries) = std::fs::read_dir(&net.qemu_run_dir) {
            pids.extend(
                entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "pid"))
                    .filter_map(|p| read_pid(&p)),
            );
        }
        // A killed daemon or QEMU leaves its pid file.
        pids.retain(|pid| runs(*pid));
        pids.sort_unstable();
        pids.dedup();
        Ok(pids)
    }

    fn machine_table(&self) -> String {
        format!("{CUT}_{}", self.name)
    }
}

/// The nftables table a cut link's rules live in.
const CUT: &str = "kvm2_cut";

/// Whether `pid` exists and is not a zombie.
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|close| stat.get(close + 1..))
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z")
    })
}

fn read_pid(file: &Path) -> Option<u32> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// Sends `signal` to `pids`; one that exited meanwhile (an sshd session
/// ending) is no error.
fn signal(pids: &[u32], signal: &str) -> io::Result<()> {
    for pid in pids {
        let out = Command::new("kill")
            .args([signal, &pid.to_string()])
            .output()?;
        if !out.status.success() && runs(*pid) {
            return Err(io::Error::other(format!(
                "kill {signal} {pid}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// Loads `script` (`nft -f -`), in `netns` or the machine's namespace.
fn nft(netns: Option<&str>, script: &str) -> io::Result<()> {
    use std::io::Write;
    let mut c = match netns {
        Some(ns) => crate::command_in(ns, "nft"),
        None => Command::new("nft"),
    };
    let mut child = c
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "nft -f - ({script:?}): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn delete_table(netns: Option<&str>, table: &str) -> io::Result<()> {
    let mut c = match netns {
        Some(ns) => crate::command_in(ns, "nft"),
        None => Command::new("nft"),
    };
    let out = c.args(["delete", "table", "inet", table]).output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.success() || stderr.contains("No such file or directory") {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "nft delete table inet {table}: {}",
            stderr.trim()
        )))
    }
}

fn run(c: &mut Command) -> io::Result<()> {
    let out = c.output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{:?}: {}",
            c,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

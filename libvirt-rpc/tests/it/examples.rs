//! The user examples (`examples/`), run against real daemons of the tests'
//! own (no sandbox needed): their logic is compiled into this binary and
//! called as their `main` would call it — with the arguments a user would
//! type and an output buffer — asserting what they printed and did.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use libvirt_rpc::{Config, DomainDefineFlags, DomainUndefineFlags};
use testkit::libvirtd::{POOL, PrivateLibvirtd};
use testkit::names::unique;
use testkit::sshd::OwnSshd;

use crate::support;
use crate::tls::{Pki, tls_daemon};

#[allow(dead_code)] // its `main`
#[path = "../../examples/list_domains.rs"]
mod list_domains;

#[allow(dead_code)] // its `main`
#[path = "../../examples/upload_volume.rs"]
mod upload_volume;

#[allow(dead_code)] // its `main`
#[path = "../../examples/watch_events.rs"]
mod watch_events;

#[allow(dead_code)] // its `main`
#[path = "../../examples/reconnect.rs"]
mod reconnect;

#[allow(dead_code)] // its `main`
#[path = "../../examples/connect_tls.rs"]
mod connect_tls;

#[allow(dead_code)] // its `main`
#[path = "../../examples/connect_ssh.rs"]
mod connect_ssh;

#[allow(dead_code)] // its `main`
#[path = "../../examples/domain_stats.rs"]
mod domain_stats;

#[allow(dead_code)] // its `main`
#[path = "../../examples/clone_volume.rs"]
mod clone_volume;

/// The `connect_tls` example for `uri`, retrying while the daemon's port
/// comes up; what it printed.
async fn connect_tls_run(uri: &str) -> Result<String, Box<dyn std::error::Error>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut out = Vec::new();
        match bounded("connect_tls", connect_tls::run(&[uri.to_owned()], &mut out)).await {
            Err(e)
                if e.downcast_ref::<libvirt_rpc::Error>()
                    .is_some_and(libvirt_rpc::Error::is_disconnected)
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => return r.map(|()| String::from_utf8(out).unwrap()),
        }
    }
}

#[tokio::test]
async fn connect_tls_example_lists_the_daemons_domains() {
    let pki = Pki::new();
    let (daemon, port) = tls_daemon(&pki, None);
    let uri = format!(
        "test+tls://127.0.0.1:{port}/default?pkipath={}",
        pki.client_dir().display()
    );
    let out = connect_tls_run(&uri)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    // The test driver's built-in domain, running.
    assert!(
        out.lines()
            .any(|l| l.starts_with("test ") && l.ends_with("Running")),
        "{out}"
    );
}

#[tokio::test]
async fn connect_tls_example_says_the_daemon_refused_the_certificate() {
    let pki = Pki::new();
    let (_daemon, port) = tls_daemon(&pki, Some("*CN=someone-else*"));
    let uri = format!(
        "test+tls://127.0.0.1:{port}/default?pkipath={}",
        pki.client_dir().display()
    );
    let e = connect_tls_run(&uri).await.unwrap_err();
    let e = e.downcast_ref::<libvirt_rpc::Error>().unwrap();
    assert!(
        connect_tls::hint(e).is_some_and(|h| h.contains("tls_allowed_dn_list")),
        "{e:?}"
    );
}

/// A `test+ssh` URI reaching `daemon`'s socket through `sshd`, trusting
/// the host keys in `known_hosts`.
fn ssh_uri(sshd: &OwnSshd, daemon: &PrivateLibvirtd, known_hosts: &std::path::Path) -> String {
    format!(
        "test+ssh://{user}@127.0.0.1:{port}/default?keyfile={key}&known_hosts={kh}&socket={socket}",
        user = sshd.user,
        port = sshd.port,
        key = sshd.client_key.display(),
        kh = known_hosts.display(),
        socket = daemon.socket().display(),
    )
}

#[tokio::test]
async fn connect_ssh_example_reaches_a_daemon_through_sshd() {
    let daemon = PrivateLibvirtd::start();
    let sshd = OwnSshd::start("");
    let uri = ssh_uri(&sshd, &daemon, &sshd.known_hosts);
    let mut out = Vec::new();
    bounded("connect_ssh", connect_ssh::run(&[uri], &mut out))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let out = String::from_utf8(out).unwrap();
    let first = out.lines().next().unwrap_or_default();
    assert!(first.contains(" runs libvirt "), "{out}");
    assert!(out.lines().any(|l| l.starts_with("test ")), "{out}");
}

#[tokio::test]
async fn connect_ssh_example_refuses_an_unknown_host_key() {
    let daemon = PrivateLibvirtd::start();
    let sshd = OwnSshd::start("");
    let empty = sshd.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let uri = ssh_uri(&sshd, &daemon, &empty);
    let e = bounded("connect_ssh", connect_ssh::run(&[uri], &mut Vec::new()))
        .await
        .unwrap_err();
    let e = e
        .downcast_ref::<libvirt_rpc::Error>()
        .unwrap_or_else(|| panic!("a libvirt-rpc error: {e}"));
    assert!(
        matches!(e, libvirt_rpc::Error::Ssh(ssh) if ssh.is_permanent()),
        "{e:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_ssh_example_goes_through_a_bastion() {
    let daemon = PrivateLibvirtd::start();
    let target = OwnSshd::start("");
    let bastion = OwnSshd::start("");
    // One known_hosts file for both hosts, as a user has.
    let known_hosts = target.dir.path().join("both_known_hosts");
    let both = format!(
        "{}{}",
        std::fs::read_to_string(&target.known_hosts).unwrap(),
        std::fs::read_to_string(&bastion.known_hosts).unwrap()
    );
    std::fs::write(&known_hosts, both).unwrap();
    let uri = ssh_uri(&target, &daemon, &known_hosts);
    let jump = format!(
        "jump={}@127.0.0.1:{},key={}",
        bastion.user,
        bastion.port,
        bastion.client_key.display()
    );
    let mut out = Vec::new();
    bounded("connect_ssh", connect_ssh::run(&[uri, jump], &mut out))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let out = String::from_utf8(out).unwrap();
    assert!(out.lines().any(|l| l.starts_with("test ")), "{out}");
}

#[tokio::test]
async fn connect_ssh_example_needs_a_uri() {
    let e = connect_ssh::run(&[], &mut Vec::new()).await.unwrap_err();
    assert!(e.to_string().starts_with("usage:"), "{e}");
}

/// `uri` served by `daemon`, its socket named as a user names a
/// non-default one.
fn private_uri(daemon: &PrivateLibvirtd, uri: &str) -> String {
    format!("{uri}?socket={}", daemon.socket().display())
}

/// A private daemon whose socket is up (a client of it connected once).
async fn ready_daemon() -> PrivateLibvirtd {
    let daemon = PrivateLibvirtd::start();
    support::connect(&daemon, "test:///default", Config::default())
        .await
        .close()
        .await;
    daemon
}

/// An output buffer the test reads while an example writes to it.
#[derive(Clone, Default)]
struct SharedOut(Arc<Mutex<Vec<u8>>>);

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

async fn bounded<F: std::future::Future>(what: &str, f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("{what} within 60 s"))
}

#[tokio::test]
async fn list_domains_example_prints_the_test_drivers_running_domain() {
    let daemon = ready_daemon().await;
    let mut out = Vec::new();
    bounded(
        "list_domains",
        list_domains::run(&[private_uri(&daemon, "test:///default")], &mut out),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let out = String::from_utf8(out).unwrap();
    let line = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("test"))
        .unwrap_or_else(|| panic!("no `test` domain in:\n{out}"));
    assert!(line.contains("Running"), "{line}");
    assert!(line.ends_with("id 1"), "{line}");
}

#[tokio::test]
async fn list_domains_example_refuses_extra_arguments() {
    let args = ["a".to_owned(), "b".to_owned()];
    let e = list_domains::run(&args, &mut Vec::new()).await.unwrap_err();
    assert!(e.to_string().contains("usage"), "{e}");
}

#[tokio::test]
async fn upload_volume_example_creates_the_volume_and_reports_progress_to_the_end() {
    let daemon = PrivateLibvirtd::start();
    support::storage(&daemon).await.close().await; // the pool exists
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("disk.img");
    // Not a multiple of the example's 1 MiB reads.
    let data = testkit::bytes::pseudo_random((3 << 20) + 4321, 14);
    std::fs::write(&file, &data).unwrap();
    let vol = unique("lvrpc-example-upload");
    let args = [
        "--uri".to_owned(),
        private_uri(&daemon, "storage:///system"),
        POOL.to_owned(),
        vol.clone(),
        file.display().to_string(),
    ];
    let mut out = Vec::new();
    let r = bounded("upload_volume", upload_volume::run(&args, &mut out)).await;
    let out = String::from_utf8(out).unwrap();
    r.unwrap_or_else(|e| panic!("{e}; printed:\n{out}\n{}", daemon.log()));
    let landed = std::fs::read(daemon.pool_dir().join(&vol)).unwrap();
    assert!(landed == data, "the volume holds the file");
    assert!(
        out.contains(&format!("created volume {vol} in pool {POOL}")),
        "{out}"
    );
    let progress: Vec<&str> = out.lines().filter(|l| l.starts_with("uploaded")).collect();
    assert!(progress.len() >= 2, "{out}");
    assert!(progress.last().unwrap().ends_with("(100%)"), "{out}");
    assert!(
        out.contains(&format!("done: {} bytes into ", data.len())),
        "{out}"
    );

    // Again into the volume that now exists: found, not created.
    let again = testkit::bytes::pseudo_random(data.len(), 15);
    std::fs::write(&file, &again).unwrap();
    let mut out = Vec::new();
    bounded("upload_volume", upload_volume::run(&args, &mut out))
        .await
        .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(!out.contains("created volume"), "{out}");
    assert!(std::fs::read(daemon.pool_dir().join(&vol)).unwrap() == again);
}

#[tokio::test]
async fn upload_volume_example_fails_on_a_missing_pool_without_touching_anything() {
    let daemon = ready_daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("disk.img");
    std::fs::write(&file, b"data").unwrap();
    let args = [
        "--uri".to_owned(),
        private_uri(&daemon, "storage:///system"),
        "no-such-pool".to_owned(),
        "v".to_owned(),
        file.display().to_string(),
    ];
    let e = bounded("upload_volume", upload_volume::run(&args, &mut Vec::new()))
        .await
        .unwrap_err();
    let e = e
        .downcast::<libvirt_rpc::Error>()
        .unwrap_or_else(|e| panic!("not a libvirt error: {e}"));
    assert!(e.is_not_found(), "{e:?}");
}

#[tokio::test]
async fn domain_stats_example_reads_typed_parameters_by_their_names() {
    let daemon = ready_daemon().await;
    let mut out = Vec::new();
    bounded(
        "domain_stats",
        domain_stats::run(&[private_uri(&daemon, "test:///default")], &mut out),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let out = String::from_utf8(out).unwrap();
    // The test driver's running domain: its state from `state.state` (an
    // Int read through `to_u64`; the test driver reports only the state
    // group), then every parameter.
    let summary = out
        .lines()
        .find(|l| l.starts_with("test "))
        .unwrap_or_default();
    assert!(summary.contains("state=running (reason 0)"), "{out}");
    assert!(out.lines().any(|l| l == "  state.state=1"), "{out}");
    assert!(out.lines().any(|l| l == "  state.reason=0"), "{out}");
}

#[tokio::test]
async fn clone_volume_example_copies_through_async_read_and_write() {
    let daemon = PrivateLibvirtd::start();
    let c = support::storage(&daemon).await;
    let source = unique("lvrpc-example-src");
    let data = testkit::bytes::pseudo_random((5 << 20) + 777, 16);
    let pool = c.storage_pool_lookup_by_name(POOL).await.unwrap();
    let xml = format!(
        "<volume><name>{source}</name><capacity unit='bytes'>{}</capacity>\
         <target><format type='raw'/></target></volume>",
        data.len()
    );
    let vol = c
        .storage_vol_create_xml(&pool, &xml, libvirt_rpc::StorageVolCreateFlags::empty())
        .await
        .unwrap();
    c.storage_vol_upload(
        &vol,
        0,
        data.len() as u64,
        libvirt_rpc::StorageVolStreamFlags::empty(),
        data.as_slice(),
    )
    .await
    .unwrap();
    c.close().await;
    let copy = unique("lvrpc-example-copy");
    let args = [
        "--uri".to_owned(),
        private_uri(&daemon, "storage:///system"),
        POOL.to_owned(),
        source.clone(),
        copy.clone(),
    ];
    let mut out = Vec::new();
    bounded("clone_volume", clone_volume::run(&args, &mut out))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with(&format!("copied {} bytes", data.len())),
        "{out}"
    );
    assert!(std::fs::read(daemon.pool_dir().join(&copy)).unwrap() == data);
    // The copy exists now: refused before any stream, nothing changed.
    let e = bounded("clone_volume", clone_volume::run(&args, &mut Vec::new()))
        .await
        .unwrap_err();
    assert!(e.downcast_ref::<libvirt_rpc::Error>().is_some(), "{e}");
    assert!(std::fs::read(daemon.pool_dir().join(&copy)).unwrap() == data);
}

#[tokio::test]
async fn watch_events_example_prints_a_domains_lifecycle() {
    let daemon = ready_daemon().await;
    let out = SharedOut::default();
    let args = [private_uri(&daemon, "test:///default")];
    let name = unique("lvrpc-example-ev");
    let mut writer = out.clone();
    let watch = watch_events::run(&args, &mut writer);
    let drive = async {
        while !out.text().contains("watching lifecycle events") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let c = support::connect(&daemon, "test:///default", Config::default()).await;
        let dom = c
            .domain_define_xml_flags(&support::domain_xml(&name), DomainDefineFlags::empty())
            .await
            .unwrap();
        c.domain_create(&dom).await.unwrap();
        c.domain_destroy(&dom).await.unwrap();
        c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
            .await
            .unwrap();
        c.close().await;
        // Until the example printed the last of them.
        while !out
            .text()
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("Undefined"))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    bounded("the four events printed", async {
        tokio::select! {
            r = watch => panic!("watch_events ended: {r:?}\n{}", out.text()),
            () = drive => {}
        }
    })
    .await;
    let text = out.text();
    let seen: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(name.as_str()))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(
        seen,
        ["Defined", "Started", "Stopped", "Undefined"],
        "{text}"
    );
}

#[tokio::test]
async fn watch_events_example_ends_with_the_reason_when_the_daemon_dies() {
    let mut daemon = ready_daemon().await;
    let out = SharedOut::default();
    let args = [private_uri(&daemon, "test:///default")];
    let mut writer = out.clone();
    let watch = watch_events::run(&args, &mut writer);
    let kill = async {
        while !out.text().contains("watching lifecycle events") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        daemon.kill();
        std::future::pending::<()>().await;
    };
    let e = bounded("watch_events to end", async {
        tokio::select! {
            r = watch => r.unwrap_err(),
            () = kill => unreachable!(),
        }
    })
    .await;
    assert!(e.to_string().contains("connection lost"), "{e}");
}

/// Defines domain `name` on `daemon`'s test driver.
async fn define_on(daemon: &PrivateLibvirtd, name: &str) {
    let c = support::connect(daemon, "test:///default", Config::default()).await;
    c.domain_define_xml_flags(&support::domain_xml(name), DomainDefineFlags::empty())
        .await
        .unwrap();
    c.close().await;
}

/// The `reconnect` example goes on across a daemon restart: it says so,
/// and prints the events of the new daemon. Prints how long the restart
/// took to be bridged: to the first call on the new link and to the first
/// event received again.
#[tokio::test]
async fn reconnect_example_carries_on_across_a_daemon_restart() {
    let mut daemon = ready_daemon().await;
    let out = SharedOut::default();
    let args = [private_uri(&daemon, "test:///default")];
    let (before, after) = (unique("lvrpc-example-rc-a"), unique("lvrpc-example-rc-b"));
    let mut writer = out.clone();
    let watch = reconnect::run(&args, &mut writer);
    let printed = |out: &SharedOut, what: &str| {
        let out = out.clone();
        let what = what.to_owned();
        async move {
            while !out.text().contains(&what) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    let drive = async {
        printed(&out, "across reconnects").await;
        define_on(&daemon, &before).await;
        printed(&out, &format!("{before:<20} Defined")).await;
        let restarted = Instant::now();
        daemon.restart();
        let up = restarted.elapsed();
        printed(&out, "reconnected (link 1)").await;
        let resubscribed = restarted.elapsed();
        define_on(&daemon, &after).await;
        printed(&out, &format!("{after:<20} Defined")).await;
        println!(
            "daemon restart: up again after {up:?}, subscription back after {resubscribed:?}, \
             first event after {:?}",
            restarted.elapsed()
        );
    };
    bounded("the restart bridged", async {
        tokio::select! {
            r = watch => panic!("reconnect ended: {r:?}\n{}", out.text()),
            () = drive => {}
        }
    })
    .await;
}

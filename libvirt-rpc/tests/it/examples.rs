//! The user examples (`examples/`), run against real daemons: their logic
//! is compiled into this binary and called as their `main` would call it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use testkit::libvirtd::PrivateLibvirtd;
use testkit::sshd::OwnSshd;

use crate::tls::{Pki, tls_daemon};

#[allow(dead_code)] // its `main`
#[path = "../../examples/connect_tls.rs"]
mod connect_tls;

#[allow(dead_code)] // its `main`
#[path = "../../examples/connect_ssh.rs"]
mod connect_ssh;

/// `connect_tls::list_domains`, retrying while the daemon's port comes up.
async fn list_over_tls(uri: &str) -> Result<Vec<String>, libvirt_rpc::Error> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match connect_tls::list_domains(uri).await {
            Err(e) if e.is_disconnected() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => return r,
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
    let lines = list_over_tls(&uri)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    // The test driver's built-in domain, running.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("test ") && l.ends_with("Running")),
        "{lines:?}"
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
    let e = list_over_tls(&uri).await.unwrap_err();
    assert!(
        connect_tls::hint(&e).contains("tls_allowed_dn_list"),
        "{e:?}"
    );
}

#[tokio::test]
async fn connect_ssh_example_reaches_a_daemon_through_sshd() {
    let daemon = PrivateLibvirtd::start();
    let sshd = OwnSshd::start("");
    let uri = format!(
        "test+ssh://{user}@127.0.0.1:{port}/default?keyfile={key}&known_hosts={kh}&socket={socket}",
        user = sshd.user,
        port = sshd.port,
        key = sshd.client_key.display(),
        kh = sshd.known_hosts.display(),
        socket = daemon.socket().display(),
    );
    let lines = tokio::time::timeout(Duration::from_secs(60), connect_ssh::describe_host(&uri))
        .await
        .expect("the example's own bounds end it")
        .unwrap_or_else(|e| panic!("{e}\n{}", daemon.log()));
    assert!(lines[0].contains(" runs libvirt "), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("test ")), "{lines:?}");
}

#[tokio::test]
async fn connect_ssh_example_refuses_an_unknown_host_key() {
    let daemon = PrivateLibvirtd::start();
    let sshd = OwnSshd::start("");
    let empty = sshd.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let uri = format!(
        "test+ssh://{user}@127.0.0.1:{port}/default?keyfile={key}&known_hosts={kh}&socket={socket}",
        user = sshd.user,
        port = sshd.port,
        key = sshd.client_key.display(),
        kh = empty.display(),
        socket = daemon.socket().display(),
    );
    let e = connect_ssh::describe_host(&uri).await.unwrap_err();
    let ssh = e
        .downcast_ref::<ssh_socket::Error>()
        .unwrap_or_else(|| panic!("an ssh-socket error: {e}"));
    assert!(ssh.is_permanent(), "{ssh:?}");
}

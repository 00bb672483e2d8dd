//! `Client::connect_uri` with SSH URIs (feature `ssh`) against OpenSSH
//! sshd instances of the tests' own and private libvirtds: the URI alone
//! reaches the daemon through sshd; a key from memory and a bastion come
//! from `ConnectOptions`; the errors say whether to retry.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use libvirt_rpc::ssh_socket::{self, HostKeyPolicy, JumpHost, KeySource, KeyText};
use libvirt_rpc::{Client, ConnectOptions, Error, Uri};
use testkit::libvirtd::PrivateLibvirtd;
use testkit::sshd::OwnSshd;

use crate::support;

/// A `transport` URI reaching `daemon`'s socket through `sshd`, trusting
/// the host keys in `known_hosts`, with `keyfile` when given.
fn ssh_uri(
    transport: &str,
    sshd: &OwnSshd,
    daemon: &PrivateLibvirtd,
    known_hosts: &Path,
    keyfile: Option<&Path>,
) -> Uri {
    let key = keyfile
        .map(|k| format!("&keyfile={}", k.display()))
        .unwrap_or_default();
    format!(
        "test+{transport}://{user}@127.0.0.1:{port}/default?known_hosts={kh}&socket={socket}{key}",
        user = sshd.user,
        port = sshd.port,
        kh = known_hosts.display(),
        socket = daemon.socket().display(),
    )
    .parse()
    .unwrap()
}

/// `connect_uri`, bounded (a hang is a failure, not a stuck test).
async fn connect(uri: &Uri, options: &ConnectOptions) -> libvirt_rpc::Result<Client> {
    tokio::time::timeout(Duration::from_secs(60), Client::connect_uri(uri, options))
        .await
        .expect("connect_uri within 60 s")
}

/// The `ssh-socket` error inside an [`Error::Ssh`].
fn ssh_error(e: &Error) -> &ssh_socket::Error {
    match e {
        Error::Ssh(inner) => inner,
        other => panic!("an SSH error: {other:?}"),
    }
}

/// A daemon whose socket is up (a client of it connected once).
async fn ready_daemon() -> PrivateLibvirtd {
    let daemon = PrivateLibvirtd::start();
    support::connect(&daemon, "test:///default", libvirt_rpc::Config::default())
        .await
        .close()
        .await;
    daemon
}

#[tokio::test]
async fn ssh_and_libssh_uris_reach_the_daemon_through_sshd() {
    let daemon = ready_daemon().await;
    let sshd = OwnSshd::start("");
    for transport in ["ssh", "libssh", "libssh2"] {
        let uri = ssh_uri(
            transport,
            &sshd,
            &daemon,
            &sshd.known_hosts,
            Some(&sshd.client_key),
        );
        let c = connect(&uri, &ConnectOptions::new())
            .await
            .unwrap_or_else(|e| panic!("{transport}: {e:?}\n{}", daemon.log()));
        support::assert_lists_test_domain(&c).await;
        c.close().await;
    }
}

#[tokio::test]
async fn a_key_held_in_memory_needs_no_file() {
    let daemon = ready_daemon().await;
    let sshd = OwnSshd::start("");
    let text = std::fs::read_to_string(&sshd.client_key).unwrap();
    // No keyfile= in the URI; the key comes from the options.
    let uri = ssh_uri("ssh", &sshd, &daemon, &sshd.known_hosts, None);
    let options = ConnectOptions::new().ssh_key(KeySource::Memory(KeyText::new(text)));
    let c = connect(&uri, &options).await.unwrap();
    support::assert_lists_test_domain(&c).await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bastion_from_the_options_carries_the_connection() {
    let daemon = ready_daemon().await;
    // The target's sshd accepts only the bastion's forwarded connections
    // in practice; here both listen on loopback, and the bastion must
    // forward (its default).
    let target = OwnSshd::start("");
    let bastion = OwnSshd::start("");
    let uri = ssh_uri(
        "ssh",
        &target,
        &daemon,
        &target.known_hosts,
        Some(&target.client_key),
    );
    let options = ConnectOptions::new().ssh_jump(
        JumpHost::new(
            "127.0.0.1",
            bastion.user.clone(),
            bastion.client_key.clone(),
            HostKeyPolicy::KnownHosts(bastion.known_hosts.clone()),
        )
        .with_port(bastion.port),
    );
    let c = connect(&uri, &options).await.unwrap();
    support::assert_lists_test_domain(&c).await;
    c.close().await;
    // A bastion that refuses to forward: the dial fails, naming it.
    let closed = OwnSshd::start("PermitOpen none");
    let options = ConnectOptions::new().ssh_jump(
        JumpHost::new(
            "127.0.0.1",
            closed.user.clone(),
            closed.client_key.clone(),
            HostKeyPolicy::KnownHosts(closed.known_hosts.clone()),
        )
        .with_port(closed.port),
    );
    let e = connect(&uri, &options).await.unwrap_err();
    assert!(
        matches!(ssh_error(&e), ssh_socket::Error::JumpRefused { .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn an_unknown_host_key_or_a_refused_login_is_not_retried() {
    let daemon = ready_daemon().await;
    let sshd = OwnSshd::start("");
    let empty = sshd.dir.path().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let uri = ssh_uri("ssh", &sshd, &daemon, &empty, Some(&sshd.client_key));
    let e = connect(&uri, &ConnectOptions::new()).await.unwrap_err();
    assert!(
        matches!(ssh_error(&e), ssh_socket::Error::HostKeyUnknown { .. }),
        "{e:?}"
    );
    assert!(!e.is_transient(), "{e:?}");

    let stranger = testkit::sshd::new_key(sshd.dir.path(), "stranger");
    let uri = ssh_uri("ssh", &sshd, &daemon, &sshd.known_hosts, Some(&stranger));
    let e = connect(&uri, &ConnectOptions::new()).await.unwrap_err();
    assert!(ssh_error(&e).is_permanent(), "{e:?}");
    assert!(!e.is_transient(), "{e:?}");
}

#[tokio::test]
async fn nothing_listening_is_transient() {
    let daemon = ready_daemon().await;
    let sshd = OwnSshd::start("");
    let port = testkit::free_port();
    let uri: Uri = format!(
        "test+ssh://{}@127.0.0.1:{port}/default?known_hosts={}&keyfile={}&socket={}",
        sshd.user,
        sshd.known_hosts.display(),
        sshd.client_key.display(),
        daemon.socket().display()
    )
    .parse()
    .unwrap();
    let e = connect(&uri, &ConnectOptions::new()).await.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    assert!(!ssh_error(&e).is_permanent(), "{e:?}");
}

#[tokio::test]
async fn the_sandbox_hypervisor_answers_a_qemu_ssh_uri() {
    let d = testkit::Descriptor::require();
    let uri: Uri = format!(
        "qemu+ssh://{user}@{host}:{port}/system?keyfile={key}&known_hosts={kh}&socket={socket}",
        user = d.ssh.user,
        host = d.ssh.host,
        port = d.ssh.port,
        key = d.ssh.key_path.display(),
        kh = d.ssh.known_hosts_path.display(),
        socket = d.remote_socket.display(),
    )
    .parse()
    .unwrap();
    assert_eq!(uri.name(), "qemu:///system");
    let c = connect(&uri, &ConnectOptions::new()).await.unwrap();
    // The QEMU driver, with the sandbox's pool on it.
    assert_eq!(c.connect_get_type().await.unwrap(), "QEMU");
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    assert_eq!(pool.name, d.pool.name);
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_config_alias_with_its_bastion_reaches_the_daemon() {
    let daemon = ready_daemon().await;
    let target = OwnSshd::start("");
    let bastion = OwnSshd::start("");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    let config = target.ssh_config_block("hv1", &["ProxyJump bastion".to_owned()])
        + &bastion.ssh_config_block("bastion", &[]);
    std::fs::write(&file, config).unwrap();
    // The URI names only the alias and the daemon's socket, as a user of
    // `virsh -c qemu+ssh://hv1/system` with that ~/.ssh/config would.
    let uri: Uri = format!(
        "test+ssh://hv1/default?socket={}",
        daemon.socket().display()
    )
    .parse()
    .unwrap();
    let options =
        ConnectOptions::new().ssh_user_config(ssh_socket::UserConfig::load(&file).unwrap());
    let c = connect(&uri, &options).await.unwrap();
    support::assert_lists_test_domain(&c).await;
    c.close().await;
    // Without the config, the alias is a name nobody resolves: no config
    // is read unless asked for.
    let e = connect(
        &uri,
        &ConnectOptions::new().ssh_key(KeySource::File(target.client_key.clone())),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::Ssh(_) | Error::SshSetup { .. }), "{e:?}");
}

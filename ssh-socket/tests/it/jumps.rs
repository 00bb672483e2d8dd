//! Dialling through jump hosts (bastions): sshd instances of the test's
//! own as bastions, the sandbox's sshd as the target.

use std::time::{Duration, Instant};

use ssh_socket::{HostKeyPolicy, JumpHost};
use testkit::relay::Relay;
use testkit::sshd::OwnSshd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{UnixServer, fast_keepalive, sandbox_config};

fn jump(bastion: &OwnSshd) -> JumpHost {
    JumpHost::new(
        "127.0.0.1",
        bastion.user.clone(),
        bastion.client_key.clone(),
        HostKeyPolicy::KnownHosts(bastion.known_hosts.clone()),
    )
    .with_port(bastion.port)
}

/// Writes `n` bytes of a pattern and reads them back through `socket`.
async fn echo(socket: ssh_socket::SshSocket, n: usize) {
    let (mut r, mut w) = tokio::io::split(socket);
    let data: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let expected = data.clone();
    let writer = tokio::spawn(async move { w.write_all(&data).await.unwrap() });
    let mut got = vec![0u8; n];
    tokio::time::timeout(Duration::from_secs(60), r.read_exact(&mut got))
        .await
        .expect("echo within 60 s")
        .unwrap();
    assert!(got == expected, "echoed bytes differ");
    writer.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dials_through_one_and_two_bastions() {
    let server = UnixServer::echo();
    let first = OwnSshd::start("");
    let second = OwnSshd::start("");

    let one = sandbox_config(&server.path).with_jump(jump(&first));
    let socket = ssh_socket::dial(&one).await.expect("through one bastion");
    // More than the SSH window, through two layers of channels.
    echo(socket, 3 << 20).await;

    let two = sandbox_config(&server.path)
        .with_jump(jump(&first))
        .with_jump(jump(&second));
    let socket = ssh_socket::dial(&two).await.expect("through two bastions");
    let closer = socket.closer();
    echo(socket, 64 << 10).await;
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .expect("teardown within 2 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bastion_that_forbids_forwarding_is_a_permanent_typed_error() {
    let server = UnixServer::echo();
    let bastion = OwnSshd::start("PermitOpen none");
    let config = sandbox_config(&server.path).with_jump(jump(&bastion));
    let err = ssh_socket::dial(&config).await.unwrap_err();
    assert!(
        matches!(&err, ssh_socket::Error::JumpRefused { prohibited: true, port, .. } if *port == bastion.port),
        "{err:?}"
    );
    assert!(err.is_permanent(), "{err}");
    assert!(err.to_string().contains("jump host 127.0.0.1:"), "{err}");

    // A bastion whose host key is not the one known: the error names the
    // bastion, not the target.
    let other = OwnSshd::start("");
    let mut wrong = jump(&bastion);
    wrong.host_keys = HostKeyPolicy::KnownHosts(other.known_hosts.clone());
    let err = ssh_socket::dial(&sandbox_config(&server.path).with_jump(wrong))
        .await
        .unwrap_err();
    assert!(err.is_host_key(), "{err:?}");
    assert!(err.to_string().contains(&bastion.port.to_string()), "{err}");
}

/// Invariant 1 through a bastion: the bastion's link frozen (every byte
/// held), the socket is declared dead by its watchdog and torn down in
/// bounded time, and closing it returns at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_bastion_ends_the_link_in_bounded_time() {
    let server = UnixServer::echo();
    let bastion = OwnSshd::start("");
    let relay = Relay::tcp(format!("127.0.0.1:{}", bastion.port)).await;
    let config = sandbox_config(&server.path)
        .with_jump(jump(&bastion))
        .with_keepalive(fast_keepalive());
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", relay.port()))
        .await
        .unwrap();
    let socket = ssh_socket::dial_over(&config, tcp)
        .await
        .expect("through the relay");
    let closer = socket.closer();
    relay.freeze();
    let frozen = Instant::now();
    let dead = fast_keepalive().dead_after();
    tokio::time::timeout(dead + Duration::from_secs(3), closer.torn_down())
        .await
        .expect("torn down within dead_after + 3 s");
    let reason = closer.close_reason().unwrap();
    assert!(reason.is_closed(), "{reason:?}");
    eprintln!(
        "frozen bastion: link ended after {:?} ({reason})",
        frozen.elapsed()
    );
    let t = Instant::now();
    drop(socket);
    assert!(t.elapsed() < Duration::from_millis(100));
}

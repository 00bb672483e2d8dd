//! Through the forwarded socket, talk to a unix socket on the sandbox host.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::support::{UnixServer, sandbox_config};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_through_forwarded_socket_is_byte_exact() {
    let server = UnixServer::echo();
    let config = sandbox_config(&server.path);
    let socket = ssh_socket::dial(&config)
        .await
        .expect("dial the sandbox sshd");
    let (mut r, mut w) = tokio::io::split(socket);

    // 4 MiB of a non-repeating pattern, more than the 2 MiB SSH window.
    let data: Vec<u8> = (0..4u32 * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let expected = data.clone();
    let writer = tokio::spawn(async move {
        w.write_all(&data).await.unwrap();
        w
    });
    let mut got = vec![0u8; expected.len()];
    tokio::time::timeout(Duration::from_secs(60), r.read_exact(&mut got))
        .await
        .expect("echo within 60 s")
        .unwrap();
    assert!(got == expected, "echoed bytes differ");
    let w = writer.await.unwrap();

    // Half-close: the server's copy ends, and we read EOF.
    let mut socket = r.unsplit(w);
    socket.shutdown().await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), socket.read_to_end(&mut rest))
        .await
        .expect("EOF within 10 s")
        .unwrap();
    assert!(rest.is_empty());

    let closer = socket.closer();
    let t = Instant::now();
    drop(socket);
    assert!(t.elapsed() < Duration::from_millis(100));
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .expect("teardown within 2 s");
    assert!(closer.close_reason().unwrap().is_closed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_after_close_is_an_error_naming_the_close() {
    let server = UnixServer::echo();
    let mut socket = ssh_socket::dial(&sandbox_config(&server.path))
        .await
        .unwrap();
    socket.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    socket.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");
    socket.close();
    let e = socket.read(&mut buf).await.unwrap_err();
    assert!(matches!(
        ssh_socket::SshSocket::error_of(&e),
        Some(ssh_socket::Error::Closed)
    ));
    let e = socket.write_all(b"x").await.unwrap_err();
    assert!(matches!(
        ssh_socket::SshSocket::error_of(&e),
        Some(ssh_socket::Error::Closed)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_outside_the_runtime_still_tears_down() {
    let server = UnixServer::echo();
    let socket = ssh_socket::dial(&sandbox_config(&server.path))
        .await
        .unwrap();
    let closer = socket.closer();
    // A plain thread: no tokio context. Dropping must not panic or block.
    let t = Instant::now();
    std::thread::spawn(move || drop(socket)).join().unwrap();
    assert!(t.elapsed() < Duration::from_millis(100));
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .expect("teardown within 2 s");
}

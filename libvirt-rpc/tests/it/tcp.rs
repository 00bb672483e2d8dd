//! `Client::connect_tcp` against a real libvirtd listening on TCP (a
//! private daemon of the test's own, on 127.0.0.1), reached through a
//! parsed `qemu+tcp`-style URI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::time::{Duration, Instant};
use testkit::Descriptor;

use libvirt_rpc::{Client, Config, OpenFlags, Transport, Uri};
use testkit::libvirtd::PrivateLibvirtd;

use testkit::free_port;

async fn connect_when_listening(addr: (&str, u16), uri: &str) -> Client {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect_tcp(addr, uri, OpenFlags::empty(), Config::default()).await {
            Ok(c) => return c,
            Err(e) if e.is_disconnected() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("connect_tcp to {addr:?}: {e}"),
        }
    }
}

#[tokio::test]
async fn tcp_uri_reaches_a_daemon_listening_on_tcp() {
    let _sandbox = Descriptor::require(); // the same libvirtd binary and setup
    let port = free_port();
    let daemon = PrivateLibvirtd::start_tcp(port);
    let uri = Uri::parse(&format!("test+tcp://127.0.0.1:{port}/default")).unwrap();
    assert_eq!(uri.transport(), Transport::Tcp);
    let host = uri.host().unwrap();
    let c = connect_when_listening((host, uri.port_or_default().unwrap()), &uri.name()).await;
    support::assert_lists_test_domain(&c).await;
    c.close().await;
    drop(daemon);
}

#[tokio::test]
async fn tcp_connect_refused_is_a_transient_disconnect() {
    let port = free_port();
    let e = Client::connect_tcp(
        ("127.0.0.1", port),
        "test:///default",
        OpenFlags::empty(),
        Config::default(),
    )
    .await
    .unwrap_err();
    assert!(e.is_disconnected() && e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("lost"), "{e}");
}

#[tokio::test]
async fn tcp_connect_that_never_completes_ends_at_the_call_timeout() {
    // A listener that never accepts, its backlog filled: the kernel drops
    // further SYNs, so a connect hangs (for minutes, by default).
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    listener
        .bind(&std::net::SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    listener.listen(0).unwrap();
    let addr = listener.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_nonblocking(true).unwrap();
        let _ = s.connect(&addr.into());
        fillers.push(s);
    }
    let bound = Duration::from_millis(300);
    let started = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(20),
        Client::connect_tcp(
            addr,
            "test:///default",
            OpenFlags::empty(),
            Config::default().call_timeout(bound),
        ),
    )
    .await
    .expect("connect_tcp returns by its own deadline");
    let e = r.unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    // The timeout is the disconnect's source: Display says its own layer.
    let source = std::error::Error::source(&e).map(ToString::to_string);
    assert!(
        source
            .as_deref()
            .is_some_and(|s| s.contains("TCP connect took longer")),
        "{e}: {source:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

//! `Client::connect_uri` against private libvirtds: the URI alone (plus
//! TLS files named by `pkipath`) reaches a daemon over its unix socket,
//! plain TCP and TLS, and the calls work.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use libvirt_rpc::{Client, ConnectOptions, Error, PkiFile, Uri};
use testkit::libvirtd::PrivateLibvirtd;

use crate::support;
use crate::tls::{Pki, tls_daemon};
use testkit::free_port;

/// `connect_uri`, retrying while the daemon's port or socket comes up
/// (refused connections, a socket not there yet).
async fn connect_when_listening(
    text: &str,
    options: &ConnectOptions,
) -> libvirt_rpc::Result<Client> {
    let uri = Uri::parse(text).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match Client::connect_uri(&uri, options).await {
            Err(e)
                if (e.is_disconnected() || matches!(e, libvirt_rpc::Error::LocalSocket { .. }))
                    && Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => return r,
        }
    }
}

#[tokio::test]
async fn unix_uri_with_socket_parameter_reaches_the_daemon() {
    let daemon = PrivateLibvirtd::start();
    let text = format!("test+unix:///default?socket={}", daemon.socket().display());
    let c = connect_when_listening(&text, &ConnectOptions::new())
        .await
        .unwrap();
    support::assert_lists_test_domain(&c).await;
    c.close().await;
}

#[tokio::test]
async fn tcp_uri_reaches_the_daemon() {
    let port = free_port();
    let _daemon = PrivateLibvirtd::start_tcp(port);
    let c = connect_when_listening(
        &format!("test+tcp://127.0.0.1:{port}/default"),
        &ConnectOptions::new(),
    )
    .await
    .unwrap();
    support::assert_lists_test_domain(&c).await;
    c.close().await;
}

#[tokio::test]
async fn tls_uri_with_pkipath_reaches_the_daemon() {
    let pki = Pki::new();
    let (daemon, port) = tls_daemon(&pki, None);
    let dir = pki.client_dir();
    // Explicit `+tls` by address, and TLS implied by a host, by name.
    for text in [
        format!(
            "test+tls://127.0.0.1:{port}/default?pkipath={}",
            dir.display()
        ),
        format!("test://localhost:{port}/default?pkipath={}", dir.display()),
    ] {
        let c = connect_when_listening(&text, &ConnectOptions::new())
            .await
            .unwrap_or_else(|e| panic!("{text}: {e:?}\n{}", daemon.log()));
        support::assert_lists_test_domain(&c).await;
        c.close().await;
    }
}

#[tokio::test]
async fn tls_uri_with_credentials_in_the_options_reaches_the_daemon() {
    let pki = Pki::new();
    let (daemon, port) = tls_daemon(&pki, None);
    let options = ConnectOptions::new().tls_credentials(pki.credentials());
    let c = connect_when_listening(&format!("test+tls://localhost:{port}/default"), &options)
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    support::assert_lists_test_domain(&c).await;
    c.close().await;
}

#[tokio::test]
async fn tls_uri_whose_pkipath_is_empty_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "test+tls://127.0.0.1:{}/default?pkipath={}",
        free_port(),
        dir.path().display()
    );
    let e = Client::connect_uri(&Uri::parse(&text).unwrap(), &ConnectOptions::new())
        .await
        .unwrap_err();
    match &e {
        Error::TlsCredentials {
            file: PkiFile::CaCert,
            path: Some(path),
            ..
        } => assert_eq!(*path, dir.path().join("cacert.pem")),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn open_flags_of_the_options_reach_the_daemon() {
    let daemon = PrivateLibvirtd::start();
    let text = format!("test+unix:///default?socket={}", daemon.socket().display());
    let options = ConnectOptions::new().flags(libvirt_rpc::OpenFlags::READ_ONLY);
    let c = connect_when_listening(&text, &options).await.unwrap();
    // Reading works; defining is refused on a read-only connection.
    support::assert_lists_test_domain(&c).await;
    let name = testkit::names::unique("lvrpc-ro");
    let e = c
        .domain_define_xml_flags(
            &support::domain_xml(&name),
            libvirt_rpc::DomainDefineFlags::empty(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(libvirt_rpc::ErrorCode::OperationDenied),
        "{e:?}"
    );
    c.close().await;
}

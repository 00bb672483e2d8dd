//! Smoke test: handshake and simple calls against the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use testkit::Descriptor;

#[tokio::test]
async fn handshake_and_simple_calls_on_test_driver() {
    let c = support::test_driver().await;
    let v = c.connect_get_lib_version().await.unwrap();
    assert!(v >= 11_000_000, "{v}");
    support::assert_lists_test_domain(&c).await;
    c.close().await;
    assert!(c.is_closed());
}

#[tokio::test]
async fn connect_unix_reaches_the_daemon_and_reports_a_missing_socket() {
    let d = Descriptor::require();
    let c = libvirt_rpc::Client::connect_unix(
        &d.libvirt.socket,
        &d.libvirt.test_uri,
        libvirt_rpc::OpenFlags::empty(),
        libvirt_rpc::Config::default(),
    )
    .await
    .unwrap();
    c.connect_get_version().await.unwrap();
    c.close().await;
    let e = libvirt_rpc::Client::connect_unix(
        "/nonexistent/libvirt-sock",
        "test:///default",
        libvirt_rpc::OpenFlags::empty(),
        libvirt_rpc::Config::default(),
    )
    .await
    .unwrap_err();
    // Its own error naming the path, not a lost link a retry would repeat.
    assert!(
        matches!(
            e,
            libvirt_rpc::Error::LocalSocket {
                problem: libvirt_rpc::SocketProblem::Missing,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.is_transient(), "{e:?}");
    assert!(e.to_string().contains("/nonexistent/libvirt-sock"), "{e}");
}

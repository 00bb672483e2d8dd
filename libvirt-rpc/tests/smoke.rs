//! Smoke test: handshake and simple calls against the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use libvirt_rpc::ListDomainsFlags;

#[tokio::test]
async fn handshake_and_simple_calls_on_test_driver() {
    let c = common::test_driver().await;
    let v = c.connect_get_lib_version().await.unwrap();
    assert!(v >= 11_000_000, "{v}");
    let doms = c
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await
        .unwrap();
    assert!(doms.iter().any(|d| d.name == "test"), "{doms:?}");
    c.close().await;
    assert!(c.is_closed());
}

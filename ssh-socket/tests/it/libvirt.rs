//! Through the forwarded socket, talk to the sandbox's libvirtd with the
//! workspace's libvirt-rpc client (open `test:///default`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::sandbox_config;
use libvirt_rpc::{Client, Config, ListDomainsFlags, OpenFlags};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libvirt_test_driver_answers_through_the_forwarded_socket() {
    let d = testkit::Descriptor::require();
    let socket = ssh_socket::dial(&sandbox_config(&d.remote_socket))
        .await
        .expect("dial the sandbox sshd");
    let closer = socket.closer();
    let client = tokio::time::timeout(
        Duration::from_secs(20),
        Client::connect(
            socket,
            &d.libvirt.test_uri,
            OpenFlags::empty(),
            Config::default(),
        ),
    )
    .await
    .expect("libvirt handshake within 20 s")
    .expect("libvirt handshake");

    let version = client.connect_get_lib_version().await.unwrap();
    let expected: Vec<u64> = d
        .libvirt
        .version
        .split('.')
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(
        version,
        expected[0] * 1_000_000 + expected[1] * 1000 + expected[2]
    );
    let domains = client
        .connect_list_all_domains(ListDomainsFlags::empty())
        .await
        .unwrap();
    assert!(
        domains.iter().any(|dom| dom.name == "test"),
        "test driver's default domain missing"
    );

    tokio::time::timeout(Duration::from_secs(5), client.close())
        .await
        .expect("libvirt close within 5 s");
    tokio::time::timeout(Duration::from_secs(2), closer.torn_down())
        .await
        .expect("ssh teardown within 2 s");
}

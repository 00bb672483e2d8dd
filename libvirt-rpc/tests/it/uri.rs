//! `Uri` against the sandbox's daemon: the socket a URI resolves to and
//! the name it sends are what the real daemon accepts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use libvirt_rpc::{Client, Config, ListDomainsFlags, OpenFlags, Uri};
use testkit::Descriptor;

async fn open(uri: &Uri) -> Client {
    let socket = uri.daemon_socket(OpenFlags::empty()).unwrap();
    Client::connect_unix(&socket, &uri.name(), OpenFlags::empty(), Config::default())
        .await
        .unwrap_or_else(|e| panic!("{uri} via {}: {e}", socket.display()))
}

#[tokio::test]
async fn unix_uri_with_socket_param_opens_both_drivers() {
    let d = Descriptor::require();
    for (driver_uri, domain) in [
        (&d.libvirt.test_uri, Some("test")),
        (&d.libvirt.qemu_uri, None),
    ] {
        let plain = Uri::parse(driver_uri).unwrap();
        let text = format!(
            "{}+unix://{}?socket={}&mode=direct",
            plain.driver(),
            plain.path(),
            d.libvirt.socket.display()
        );
        let uri = Uri::parse(&text).unwrap();
        assert_eq!(uri.name(), *driver_uri, "{text}");
        let c = open(&uri).await;
        let doms = c
            .connect_list_all_domains(ListDomainsFlags::empty())
            .await
            .unwrap();
        if let Some(name) = domain {
            assert!(doms.iter().any(|dom| dom.name == name), "{doms:?}");
        }
        c.close().await;
    }
}

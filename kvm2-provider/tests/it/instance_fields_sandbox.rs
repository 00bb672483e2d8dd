#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What `Instance` carries beyond state and address: the proxy port (from
//! the entry's `proxy.port`) and the address sources that answered on the
//! last Get. A real QEMU domain on the sandbox's bridge, booting a blank
//! disk: no guest agent ever answers, ARP and the lease source answer with
//! nothing (a bridged NIC has no libvirt lease).

use crate::http_server::qcow2_image;

use crate::provider_env::{Env, served_image};
use provider_api::{AddressSource, InstanceState, Placement, Provider};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_carry_the_proxy_port_and_the_sources_that_answered() {
    let env = Env::new();
    let body = qcow2_image("64M");
    let server = crate::http_server::serve_body(&body).await;
    let image = served_image(&server, "blank", &body, "qcow2");
    let yaml = env
        .providers()
        .images([image])
        .proxy(8443, Vec::<String>::new())
        .render();
    let provider = env.provider(&yaml, env.options());
    let owner = env.owner();

    let created = provider
        .create(&env.request(owner, Placement::Any))
        .await
        .unwrap();
    assert_eq!(created.proxy_port, Some(8443));
    assert!(
        created.address_sources.is_empty(),
        "create reads no address"
    );

    let got = provider.get(&created.id).await.unwrap();
    assert_eq!(got.state, InstanceState::Provisioning);
    assert_eq!(got.proxy_port, Some(8443));
    let sources = got.address_sources;
    assert!(
        !sources.contains(AddressSource::GuestAgent),
        "no agent runs in a blank guest: {sources:?}"
    );
    assert!(sources.contains(AddressSource::Arp), "{sources:?}");
    assert!(sources.contains(AddressSource::Lease), "{sources:?}");

    provider.delete(&created.id).await.unwrap();
}

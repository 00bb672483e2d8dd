//! Clients of the sandbox's API server, shared by the operator's tests.

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use testkit::{Descriptor, KubeService};

/// The sandbox's API server.
///
/// # Panics
/// Without a sandbox, or when its descriptor has no `kube` section.
pub fn kube_service() -> KubeService {
    Descriptor::require()
        .kube
        .expect("the sandbox descriptor has no `kube` section: restart the sandbox")
}

/// A client with the sandbox's admin credentials.
pub async fn admin(k: &KubeService) -> Client {
    client_from(Kubeconfig::read_from(&k.kubeconfig).unwrap()).await
}

/// A client for `kubeconfig`.
pub async fn client_from(kubeconfig: Kubeconfig) -> Client {
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

//! The API client of an entry's cluster, made on first use (the registry's
//! constructors must not dial or read files): from the entry's
//! `kubeconfig_file`, read anew each time a client is made, or the
//! cluster the process runs in.

use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use provider_api::Error;
use provider_api::config::KubernetesConfig;
use tokio::sync::OnceCell;

/// How long a connection to the API server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one answer may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The shared client for instance operations; checks make their own.
#[derive(Default)]
pub struct Connector {
    shared: OnceCell<Client>,
}

impl Connector {
    /// The shared client, made on the first call that succeeds.
    ///
    /// # Errors
    /// [`Permanent`](provider_api::ErrorClass::Permanent) when the
    /// kubeconfig cannot be read or used, or no in-cluster configuration
    /// exists.
    pub async fn shared(&self, config: &KubernetesConfig) -> Result<Client, Error> {
        self.shared
            .get_or_try_init(|| connect(config))
            .await
            .cloned()
    }
}

/// A client of its own (its own connections, closed when it is dropped).
///
/// # Errors
/// As [`Connector::shared`].
pub async fn connect(config: &KubernetesConfig) -> Result<Client, Error> {
    let mut kube_config = match &config.kubeconfig_file {
        Some(path) => {
            let file = Kubeconfig::read_from(path.as_path()).map_err(|e| {
                Error::wrap(
                    provider_api::ErrorClass::Permanent,
                    format!("cannot read the kubeconfig {path} (is its Secret mounted?)"),
                    e,
                )
            })?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| {
                    Error::wrap(
                        provider_api::ErrorClass::Permanent,
                        format!("cannot use the kubeconfig {path}"),
                        e,
                    )
                })?
        }
        None => Config::infer().await.map_err(|e| {
            Error::wrap(
                provider_api::ErrorClass::Permanent,
                "no kubeconfig_file and no cluster configuration found (in-cluster or KUBECONFIG)",
                e,
            )
        })?,
    };
    kube_config.connect_timeout = Some(CONNECT_TIMEOUT);
    kube_config.read_timeout = Some(READ_TIMEOUT);
    Client::try_from(kube_config).map_err(|e| {
        Error::wrap(
            provider_api::ErrorClass::Permanent,
            "cannot build a client for the cluster",
            e,
        )
    })
}

//! [`PodsChecker`]: the entry's one target, its namespace, is reachable
//! when the API server answers and lets the provider list Pods there.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use provider_api::config::KubernetesConfig;
use provider_api::{CheckReason, Checker, TargetStatus};

use crate::client::connect;

/// Checks the entry's namespace on a client of its own.
#[derive(Debug)]
pub struct PodsChecker {
    config: KubernetesConfig,
}

impl PodsChecker {
    /// The checker of an entry.
    pub fn new(config: KubernetesConfig) -> Self {
        PodsChecker { config }
    }

    async fn check_once(&self) -> TargetStatus {
        let target = self.config.namespace.clone();
        let started = Instant::now();
        let client = match connect(&self.config).await {
            Ok(c) => c,
            Err(e) => {
                return TargetStatus::unreachable(target, CheckReason::Other, e.to_string());
            }
        };
        let version = match client.apiserver_version().await {
            Ok(v) => v.git_version,
            Err(e) => {
                return TargetStatus::unreachable(target, reason(&e), describe(&e));
            }
        };
        let pods: Api<Pod> = Api::namespaced(client, self.config.namespace.as_str());
        match pods.list_metadata(&ListParams::default().limit(1)).await {
            Ok(_) => TargetStatus::reachable(target, started.elapsed(), Some(version)),
            Err(e) => TargetStatus::unreachable(target, reason(&e), describe(&e)),
        }
    }
}

/// Why a call failed, as a check reason: refused credentials or rights
/// are `AuthFailed`, no answer `ConnectFailed`, other answers
/// `DaemonError`.
fn reason(e: &kube::Error) -> CheckReason {
    match e {
        kube::Error::Api(s) if s.code == 401 || s.code == 403 => CheckReason::AuthFailed,
        kube::Error::Api(_) => CheckReason::DaemonError,
        _ => CheckReason::ConnectFailed,
    }
}

/// A short message (kube's error, whose text holds no credentials).
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} {}: {}", s.code, s.reason, s.message),
        other => other.to_string(),
    }
}

#[async_trait]
impl Checker for PodsChecker {
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus> {
        let status = match tokio::time::timeout(timeout, self.check_once()).await {
            Ok(s) => s,
            Err(_) => TargetStatus::unreachable(
                self.config.namespace.clone(),
                CheckReason::Timeout,
                format!("no answer within {timeout:?}"),
            ),
        };
        vec![status]
    }
}

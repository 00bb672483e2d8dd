//! Instance events from a watch on the entry's Pods: a Pod turning ready,
//! failing, being deleted or vanishing outside any provider call becomes
//! `Changed`, and each (re)start of the watch a `Resync` of the namespace.
//!
//! No task: the source polls kube's watcher stream inside `next`, so
//! dropping it ends the watch. The client is made on the first `next`
//! (constructors must not dial); a failure to make it waits (1 s doubling
//! to 30 s) and tries again, while the watcher itself backs off on a
//! failed watch and lists again (`Init`…`InitDone`, hence the `Resync`).

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use provider_api::config::KubernetesConfig;
use provider_api::{
    Change, Identifier, InstanceEvent, InstanceEventSource, InstanceState, ProviderId, ProviderType,
};

use crate::client::connect;
use crate::labels::PROVIDER_LABEL;
use crate::pod_state;

const FIRST_RETRY: Duration = Duration::from_secs(1);
const LAST_RETRY: Duration = Duration::from_secs(30);

type PodStream = BoxStream<'static, Result<Event<Pod>, watcher::Error>>;

/// The watch of one entry's Pods.
pub struct PodEvents {
    entry: Identifier,
    config: KubernetesConfig,
    stream: Option<PodStream>,
    retry: Duration,
    /// The last state seen per Pod name (a change is reported once).
    seen: HashMap<String, &'static str>,
}

impl PodEvents {
    /// The watch of `entry`'s Pods (nothing is dialled yet).
    pub fn new(entry: Identifier, config: KubernetesConfig) -> PodEvents {
        PodEvents {
            entry,
            config,
            stream: None,
            retry: FIRST_RETRY,
            seen: HashMap::new(),
        }
    }

    async fn stream(&mut self) -> &mut PodStream {
        loop {
            if self.stream.is_some() {
                break;
            }
            match connect(&self.config).await {
                Ok(client) => {
                    let pods: Api<Pod> = Api::namespaced(client, self.config.namespace.as_str());
                    let selector = format!("{PROVIDER_LABEL}={}", self.entry);
                    let config = watcher::Config::default().labels(&selector);
                    self.stream = Some(watcher::watcher(pods, config).default_backoff().boxed());
                    self.retry = FIRST_RETRY;
                }
                Err(e) => {
                    tracing::warn!(entry = %self.entry, error = %e, "pod watch: no client; retrying");
                    tokio::time::sleep(self.retry).await;
                    self.retry = (self.retry * 2).min(LAST_RETRY);
                }
            }
        }
        // Set just above.
        #[allow(clippy::unwrap_used)]
        self.stream.as_mut().unwrap()
    }

    fn id(&self, pod: &Pod) -> Option<ProviderId> {
        let name = Identifier::parse(pod.metadata.name.as_deref()?).ok()?;
        Some(ProviderId::new(
            ProviderType::Kubernetes,
            self.entry.clone(),
            self.config.namespace.clone(),
            name,
        ))
    }

    /// The event an applied Pod makes, if its state changed.
    fn applied(&mut self, pod: &Pod) -> Option<InstanceEvent> {
        let id = self.id(pod)?;
        let (state, _) = pod_state::read(pod);
        let change = change_of(&state);
        let name = id.instance().to_string();
        if self.seen.insert(name, state.as_str()) == Some(state.as_str()) {
            return None;
        }
        Some(InstanceEvent::Changed { id, change })
    }
}

/// What a state means as a change.
fn change_of(state: &InstanceState) -> Change {
    match state {
        InstanceState::Running => Change::Started,
        InstanceState::Failed { .. } => Change::Crashed,
        InstanceState::Stopped => Change::Stopped,
        _ => Change::Other,
    }
}

#[async_trait]
impl InstanceEventSource for PodEvents {
    async fn next(&mut self) -> Option<InstanceEvent> {
        loop {
            let item = self.stream().await.next().await;
            match item {
                // The watcher never ends by itself; if it did, start over.
                None => self.stream = None,
                Some(Ok(Event::Init)) => self.seen.clear(),
                Some(Ok(Event::InitDone)) => {
                    return Some(InstanceEvent::Resync {
                        host: self.config.namespace.clone(),
                    });
                }
                Some(Ok(Event::InitApply(pod))) => {
                    // The listing only records states: the Resync that
                    // follows tells the caller to look at everything.
                    if let Some(id) = self.id(&pod) {
                        let (state, _) = pod_state::read(&pod);
                        self.seen.insert(id.instance().to_string(), state.as_str());
                    }
                }
                Some(Ok(Event::Apply(pod))) => {
                    if let Some(event) = self.applied(&pod) {
                        return Some(event);
                    }
                }
                Some(Ok(Event::Delete(pod))) => {
                    if let Some(id) = self.id(&pod) {
                        self.seen.remove(id.instance().as_str());
                        return Some(InstanceEvent::Changed {
                            id,
                            change: Change::Removed,
                        });
                    }
                }
                Some(Err(e)) => {
                    tracing::debug!(entry = %self.entry, error = %e, "pod watch failed; the watcher retries");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_changes() {
        assert_eq!(change_of(&InstanceState::Running), Change::Started);
        assert_eq!(
            change_of(&InstanceState::Failed { reason: "x".into() }),
            Change::Crashed
        );
        assert_eq!(change_of(&InstanceState::Stopped), Change::Stopped);
        assert_eq!(change_of(&InstanceState::Provisioning), Change::Other);
    }
}

//! [`KubernetesProvider`]: the [`Provider`] contract over Pods.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::{Api, Client};
use provider_api::config::KubernetesConfig;
use provider_api::squid::{Layout, PasswordLine, squid_conf};
use provider_api::{
    Checker, CreateRequest, Error, Identifier, Instance, ListedInstance, Placement, Provider,
    ProviderEntry, ProviderId, ProviderType, ProxyCredentials, Tag, name_from_uid,
};

use crate::check::PodsChecker;
use crate::client::Connector;
use crate::errors::{classify, is_conflict, is_not_found};
use crate::labels::{self, Ownership};
use crate::manifest::{self, PASSWD_PATH, PodParts};
use crate::pod_state;

/// A Create's budget when the request names no deadline.
pub const DEFAULT_CREATE_BUDGET: Duration = Duration::from_secs(60);
/// The budget of a Get, Delete or listing.
pub const CALL_BUDGET: Duration = Duration::from_secs(30);
/// Pods listed per page.
const PAGE: u32 = 500;

/// Egress proxies as Pods running Squid in the entry's namespace.
///
/// Cheap to clone (an `Arc` inside). [`new`](Self::new) reads and dials
/// nothing: the client is made on the first call.
#[derive(Clone)]
pub struct KubernetesProvider {
    inner: Arc<Inner>,
}

struct Inner {
    name: Identifier,
    config: KubernetesConfig,
    connector: Connector,
    checker: PodsChecker,
}

impl std::fmt::Debug for KubernetesProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesProvider")
            .field("name", &self.inner.name)
            .field("namespace", &self.inner.config.namespace)
            .finish_non_exhaustive()
    }
}

impl KubernetesProvider {
    /// The provider of a `kubernetes` entry.
    ///
    /// # Errors
    /// [`Permanent`](provider_api::ErrorClass::Permanent) for an entry of another type.
    pub fn new(entry: &ProviderEntry) -> Result<Self, Error> {
        let config = entry
            .kubernetes()
            .ok_or_else(|| Error::permanent(format!("{} is not a kubernetes entry", entry.name)))?
            .clone();
        Ok(KubernetesProvider {
            inner: Arc::new(Inner {
                name: entry.name.clone(),
                checker: PodsChecker::new(config.clone()),
                config,
                connector: Connector::default(),
            }),
        })
    }

    fn namespace(&self) -> &Identifier {
        &self.inner.config.namespace
    }

    async fn pods(&self) -> Result<Api<Pod>, Error> {
        Ok(Api::namespaced(
            self.client().await?,
            self.namespace().as_str(),
        ))
    }

    async fn secrets(&self) -> Result<Api<Secret>, Error> {
        Ok(Api::namespaced(
            self.client().await?,
            self.namespace().as_str(),
        ))
    }

    async fn client(&self) -> Result<Client, Error> {
        self.inner.connector.shared(&self.inner.config).await
    }

    fn id(&self, name: Identifier) -> ProviderId {
        ProviderId::new(
            ProviderType::Kubernetes,
            self.inner.name.clone(),
            self.namespace().clone(),
            name,
        )
    }

    /// The instance name of `id`, once `id` is proved to be this entry's.
    fn instance_of<'a>(&self, id: &'a ProviderId) -> Result<&'a Identifier, Error> {
        if id.provider_type() != ProviderType::Kubernetes
            || id.provider() != &self.inner.name
            || id.host() != self.namespace()
        {
            return Err(Error::permanent(format!(
                "{id} was not issued by kubernetes provider {} (namespace {})",
                self.inner.name,
                self.namespace()
            )));
        }
        Ok(id.instance())
    }

    fn instance(&self, pod: &Pod, name: &Identifier) -> Instance {
        let (state, ip) = pod_state::read(pod);
        let created_at = pod
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| SystemTime::from(t.0));
        Instance::new(self.id(name.clone()), state, ip, created_at)
            .with_proxy_port(self.inner.config.proxy.port)
    }

    /// The Pod named `name` and whether it is ours.
    async fn find(&self, pods: &Api<Pod>, name: &str) -> Result<Option<(Pod, Ownership)>, Error> {
        let pod = pods
            .get_opt(name)
            .await
            .map_err(|e| classify(&format!("read Pod {}/{name}", self.namespace()), e))?;
        Ok(pod.map(|p| {
            let owner = labels::ownership(p.metadata.labels.as_ref(), &self.inner.name);
            (p, owner)
        }))
    }

    fn foreign(&self, name: &str, owner: &Ownership) -> Error {
        let why = match owner {
            Ownership::OtherEntry(e) => format!("it belongs to provider entry {e}"),
            _ => "it has no valid ownership mark".to_owned(),
        };
        Error::permanent(format!(
            "Pod {}/{name} is not ours: {why}",
            self.namespace()
        ))
    }

    async fn create_within(&self, req: &CreateRequest) -> Result<Instance, Error> {
        let config = &self.inner.config;
        // One target, the namespace: `Require` of any other is a host this
        // entry does not have; `Prefer` and `avoid` have no other choice.
        if let Placement::Require(host) = &req.placement
            && host != self.namespace()
        {
            return Err(Error::permanent(format!(
                "kubernetes provider {} has no host {host} (its one target is namespace {})",
                self.inner.name,
                self.namespace()
            )));
        }
        let (_, image) = config.image_for(req.image.as_ref())?;
        let (_, resources) = config.machine_type_for(req.machine_type.as_ref())?;
        let name = name_from_uid(&req.owner_uid);
        let labels = labels::labels(&self.inner.name, &req.owner_uid, &req.tags)
            .map_err(Error::permanent)?;
        let passwd = match &config.proxy.credentials_file {
            Some(path) => {
                let read = tokio::fs::read(path.as_path()).await;
                let credentials = ProxyCredentials::from_file(path, read)?;
                Some(
                    PasswordLine::new(&credentials, salt()?)
                        .map_err(|e| Error::permanent(e.to_string()))?,
                )
            }
            None => None,
        };
        let conf = squid_conf(
            &config.proxy,
            passwd.as_ref().map(|_| PASSWD_PATH),
            Layout::Container,
        )
        .map_err(|e| Error::permanent(e.to_string()))?;
        let wanted = manifest::pod(&PodParts {
            name: name.as_str(),
            namespace: self.namespace().as_str(),
            labels,
            proxy: format!("{}/{}", req.proxy_namespace, req.proxy_name),
            image,
            resources,
            port: config.proxy.port,
        });

        let pods = self.pods().await?;
        let pod = match self.find(&pods, name.as_str()).await? {
            Some((pod, owner)) => self.adopt(pod, &owner, req, name.as_str())?,
            None => match pods.create(&PostParams::default(), &wanted).await {
                Ok(pod) => pod,
                // Another create won the race: judge what it made.
                Err(e) if is_conflict(&e) => match self.find(&pods, name.as_str()).await? {
                    Some((pod, owner)) => self.adopt(pod, &owner, req, name.as_str())?,
                    None => return Err(classify("create Pod", e)),
                },
                Err(e) => {
                    return Err(classify(
                        &format!("create Pod {}/{name}", self.namespace()),
                        e,
                    ));
                }
            },
        };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let secret = manifest::secret(&pod, &uid, &conf, passwd.as_ref().map(PasswordLine::as_str));
        if let Err(e) = self.put_secret(&secret, name.as_str()).await {
            // Nothing a retry would trip over: the Pod goes (its Secret
            // with it, by its owner reference).
            self.remove_pod(&pods, name.as_str(), &uid).await.ok();
            return Err(e);
        }
        Ok(self.instance(&pod, &name))
    }

    /// An existing Pod for this owner is returned; anything else refused.
    fn adopt(
        &self,
        pod: Pod,
        owner: &Ownership,
        req: &CreateRequest,
        name: &str,
    ) -> Result<Pod, Error> {
        match owner {
            Ownership::Ours(uid) if uid == &req.owner_uid => {
                if pod.metadata.deletion_timestamp.is_some() {
                    return Err(Error::transient(format!(
                        "Pod {}/{name}, this owner's earlier instance, is still terminating",
                        self.namespace()
                    )));
                }
                Ok(pod)
            }
            Ownership::Ours(_) => Err(Error::permanent(format!(
                "Pod {}/{name} belongs to another owner",
                self.namespace()
            ))),
            other => Err(self.foreign(name, other)),
        }
    }

    /// Creates the Secret, or replaces the data of ours (a retried create).
    async fn put_secret(&self, secret: &Secret, name: &str) -> Result<(), Error> {
        let secrets = self.secrets().await?;
        let what = format!("write Secret {}/{name}", self.namespace());
        match secrets.create(&PostParams::default(), secret).await {
            Ok(_) => Ok(()),
            Err(e) if is_conflict(&e) => {
                let existing = secrets.get(name).await.map_err(|e| classify(&what, e))?;
                match labels::ownership(existing.metadata.labels.as_ref(), &self.inner.name) {
                    Ownership::Ours(_) => {
                        let mut replacement = secret.clone();
                        replacement.metadata.resource_version = existing.metadata.resource_version;
                        secrets
                            .replace(name, &PostParams::default(), &replacement)
                            .await
                            .map_err(|e| classify(&what, e))?;
                        Ok(())
                    }
                    _ => Err(Error::permanent(format!(
                        "Secret {}/{name} exists and is not ours",
                        self.namespace()
                    ))),
                }
            }
            Err(e) => Err(classify(&what, e)),
        }
    }

    /// Deletes the Pod with this UID (never one that replaced it).
    async fn remove_pod(&self, pods: &Api<Pod>, name: &str, uid: &str) -> Result<(), Error> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match pods.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(classify(
                &format!("delete Pod {}/{name}", self.namespace()),
                e,
            )),
        }
    }

    /// Deletes our Secret named `name`, if any.
    async fn remove_secret(&self, name: &str) -> Result<(), Error> {
        let secrets = self.secrets().await?;
        let what = format!("delete Secret {}/{name}", self.namespace());
        let Some(secret) = secrets
            .get_opt(name)
            .await
            .map_err(|e| classify(&what, e))?
        else {
            return Ok(());
        };
        if !matches!(
            labels::ownership(secret.metadata.labels.as_ref(), &self.inner.name),
            Ownership::Ours(_)
        ) {
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: secret.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match secrets.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(classify(&what, e)),
        }
    }
}

/// Runs `work` until `deadline`; past it, a `Transient` error.
async fn bounded<T>(
    what: &str,
    deadline: Instant,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout_at(deadline.into(), work).await {
        Ok(result) => result,
        Err(_) => Err(Error::transient(format!("{what}: deadline passed"))),
    }
}

fn salt() -> Result<[u8; 12], Error> {
    use ring::rand::SecureRandom;
    let mut salt = [0u8; 12];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| Error::transient("no random bytes for the password's salt"))?;
    Ok(salt)
}

#[async_trait]
impl Provider for KubernetesProvider {
    fn name(&self) -> &Identifier {
        &self.inner.name
    }

    fn provider_type(&self) -> ProviderType {
        ProviderType::Kubernetes
    }

    async fn create(&self, req: &CreateRequest) -> Result<Instance, Error> {
        let deadline = req
            .deadline
            .unwrap_or_else(|| Instant::now() + DEFAULT_CREATE_BUDGET);
        bounded("create", deadline, self.create_within(req)).await
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, Error> {
        let name = self.instance_of(id)?;
        bounded("get", Instant::now() + CALL_BUDGET, async {
            let pods = self.pods().await?;
            match self.find(&pods, name.as_str()).await? {
                None => Err(Error::not_found(format!(
                    "no Pod {}/{name}",
                    self.namespace()
                ))),
                Some((pod, Ownership::Ours(_))) => Ok(self.instance(&pod, name)),
                Some((_, other)) => Err(self.foreign(name.as_str(), &other)),
            }
        })
        .await
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), Error> {
        let name = self.instance_of(id)?;
        bounded("delete", Instant::now() + CALL_BUDGET, async {
            let pods = self.pods().await?;
            match self.find(&pods, name.as_str()).await? {
                None => {}
                Some((pod, Ownership::Ours(_))) => {
                    let uid = pod.metadata.uid.unwrap_or_default();
                    self.remove_pod(&pods, name.as_str(), &uid).await?;
                }
                Some((_, other)) => return Err(self.foreign(name.as_str(), &other)),
            }
            self.remove_secret(name.as_str()).await
        })
        .await
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, Error> {
        bounded("list", Instant::now() + CALL_BUDGET, async {
            let pods = self.pods().await?;
            let selector = labels::selector(&self.inner.name, tag);
            let mut params = ListParams::default().labels(&selector).limit(PAGE);
            let mut out = Vec::new();
            loop {
                let page = pods
                    .list(&params)
                    .await
                    .map_err(|e| classify(&format!("list Pods in {}", self.namespace()), e))?;
                for pod in &page.items {
                    let owner = labels::ownership(pod.metadata.labels.as_ref(), &self.inner.name);
                    let (Ownership::Ours(uid), Some(name)) = (owner, pod.metadata.name.as_deref())
                    else {
                        continue;
                    };
                    let Ok(name) = Identifier::parse(name) else {
                        continue;
                    };
                    let created = pod
                        .metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| SystemTime::from(t.0));
                    out.push(ListedInstance::new(
                        self.id(name),
                        uid,
                        labels::tags(pod.metadata.labels.as_ref()),
                        created,
                    ));
                }
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
            Ok(out)
        })
        .await
    }

    fn checker(&self) -> Option<&dyn Checker> {
        Some(&self.inner.checker)
    }

    fn instance_events(&self) -> Option<provider_api::InstanceEvents> {
        Some(Box::new(crate::events::PodEvents::new(
            self.inner.name.clone(),
            self.inner.config.clone(),
        )))
    }
}

/// Registers the `kubernetes` type's constructor.
///
/// # Errors
/// [`Permanent`](provider_api::ErrorClass::Permanent) when the type already has one.
pub fn register(registry: &mut provider_api::Registry) -> Result<(), Error> {
    registry.register(ProviderType::Kubernetes, |entry: &ProviderEntry| {
        Ok(Arc::new(KubernetesProvider::new(entry)?) as Arc<dyn Provider>)
    })
}

//! `operator run`: composes the pieces under one cancellation token.
//!
//! ```text
//!  SIGTERM/SIGINT ─▶ cancel ─┬─▶ HTTP server, discovery reflector (every replica)
//!                            └─▶ leader-only work: Proxy controller, monitor,
//!                                GC sweeper, health engine; then lease release
//!  lease lost ─────▶ leader-only work cancelled at once ─▶ exit 3 (EXIT_LEADERSHIP_LOST)
//! ```
//!
//! Every task is in one `JoinSet` owned here; shutdown waits for them at
//! most `--shutdown-timeout`, then aborts what is left and exits.
//!
//! The Proxy controller runs only on the leader, like the GC, monitor and
//! health engine: two replicas reconciling the same Proxy would race their
//! Creates (the provider's idempotency by owner would absorb it, but the
//! status would flap between writers). Followers serve discovery only.

use provider_api::error::chain;
use std::collections::BTreeSet;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, Config};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::RegistryFn;
use crate::cli::{HttpAuth, RunArgs};
use crate::crd::Proxy;
use crate::gc::proxy_api;
use crate::http::HttpState;
use crate::http::auth::{Auth, Reviewer};
use crate::leader::{Elector, LeaseConfig};
use crate::metrics::OperatorMetrics;
use crate::reconciler::{Ctx, ProviderTasks, Timeouts};

/// Exit status when leadership was lost.
const EXIT_LEADERSHIP_LOST: u8 = 3;
/// Completion triggers queued for the controller (overflow: dropped; the
/// pending poll covers it).
const TRIGGER_QUEUE: usize = 1024;

/// Runs the operator; returns the process's exit status.
pub fn main(args: RunArgs, registry: RegistryFn) -> ExitCode {
    if let Err(e) = crate::telemetry::init(&args.log) {
        eprintln!("error: --log: {e}");
        return ExitCode::FAILURE;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %chain(&e), "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let shutdown_timeout = args.shutdown_timeout.0;
    let code = rt.block_on(async {
        match run(args, registry).await {
            Ok(code) => code,
            Err(e) => {
                tracing::error!(error = %chain(e.as_ref()), "operator failed");
                ExitCode::FAILURE
            }
        }
    });
    // Tasks were awaited or aborted already; this bounds stragglers (blocking
    // threads) too.
    rt.shutdown_timeout(shutdown_timeout.min(Duration::from_secs(5)));
    code
}

async fn client(args: &RunArgs) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

async fn cluster_identity(
    client: &Client,
    flag: Option<&str>,
) -> anyhow::Result<fleet::ClusterIdentity> {
    let text = match flag {
        Some(s) => s.to_owned(),
        None => {
            let ns = Api::<Namespace>::all(client.clone())
                .get("kube-system")
                .await
                .context("read the kube-system namespace's UID (or pass --cluster-id)")?;
            ns.metadata.uid.context("kube-system has no UID")?
        }
    };
    fleet::ClusterIdentity::parse(&text).with_context(|| format!("cluster identity {text:?}"))
}

async fn run(args: RunArgs, registry: RegistryFn) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    {
        let cancel = cancel.clone();
        tasks.spawn(async move {
            wait_for_signal(&cancel).await;
            cancel.cancel();
        });
    }
    // On error the set is dropped, which aborts what started.
    let replica = Replica::start(args, registry, &mut tasks, &cancel).await?;
    let exit = replica.lead(&mut tasks, &cancel).await;
    replica.metrics.set_leader(false);
    cancel.cancel();
    drain(tasks, replica.args.shutdown_timeout.0).await;
    tracing::info!("stopped");
    exit
}

/// Waits for every task at most `timeout`, then aborts what is left.
async fn drain(mut tasks: JoinSet<()>, timeout: Duration) {
    let drained = tokio::time::timeout(timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(?timeout, "shutdown timed out; aborting the remaining tasks");
        tasks.abort_all();
    }
}

/// This replica: what its tasks are built from.
struct Replica {
    args: RunArgs,
    client: Client,
    providers: provider_api::Providers,
    provider_names: BTreeSet<provider_api::Identifier>,
    cluster: fleet::ClusterIdentity,
    metrics: OperatorMetrics,
    /// The Proxy watch cache (discovery, health engine).
    proxies: reflector::Store<Proxy>,
    /// Notified on every change the Proxy watch cache sees.
    proxies_changed: Arc<tokio::sync::Notify>,
}

impl Replica {
    /// Loads the providers, reaches the API server and starts what every
    /// replica runs: HTTP (metrics, probes, discovery) and the Proxy watch
    /// cache.
    async fn start(
        args: RunArgs,
        registry: RegistryFn,
        tasks: &mut JoinSet<()>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let (config, providers) = crate::providers::load(&args.providers_config, registry)?;
        let mut registry = prometheus_client::registry::Registry::default();
        let provider_metrics = provider_api::ProviderMetrics::new(&mut registry);
        let metrics = OperatorMetrics::new(&mut registry);
        let providers = providers.instrumented(&provider_metrics);
        let provider_names: BTreeSet<_> = config.providers.iter().map(|p| p.name.clone()).collect();

        let client = client(&args).await?;
        let cluster = cluster_identity(&client, args.cluster_id.as_deref()).await?;
        tracing::info!(cluster = cluster.as_str(), namespace = args.namespace.as_deref().unwrap_or("(all)"), providers = ?provider_names, "starting");

        let (reader, writer) = reflector::store::<Proxy>();
        let auth = match args.http_auth {
            HttpAuth::Kubernetes => Auth::Kubernetes(Box::new(Reviewer::new(
                client.clone(),
                args.http_auth_cache_ttl.0,
                args.http_auth_timeout.0,
                metrics.clone(),
            ))),
            HttpAuth::None => {
                tracing::warn!(
                    "--http-auth=none: /proxies and /metrics are open to anyone who reaches the port"
                );
                Auth::Off
            }
        };
        let state = Arc::new(HttpState {
            registry,
            proxies: reader.clone(),
            ready: false.into(),
            auth,
            metrics: metrics.clone(),
        });
        let listener = tokio::net::TcpListener::bind(args.http_addr)
            .await
            .with_context(|| format!("listen on {}", args.http_addr))?;
        tracing::info!(addr = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(), "http listening");
        tasks.spawn(crate::http::serve(
            listener,
            state.clone(),
            cancel.child_token(),
        ));
        let api = proxy_api(&client, args.namespace.as_deref());
        let proxies_changed = Arc::new(tokio::sync::Notify::new());
        spawn_proxy_cache(tasks, api, writer, state, proxies_changed.clone(), cancel);
        Ok(Self {
            args,
            client,
            providers,
            provider_names,
            cluster,
            metrics,
            proxies: reader,
            proxies_changed,
        })
    }

    /// Waits for leadership, runs the leader-only work until shutdown or
    /// until the lease is lost; the exit status.
    async fn lead(
        &self,
        tasks: &mut JoinSet<()>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<ExitCode> {
        let args = &self.args;
        let identity = args.identity.clone().unwrap_or_else(default_identity);
        let mut elector = Elector::new(
            Api::<Lease>::namespaced(self.client.clone(), &args.lease_namespace),
            LeaseConfig {
                name: args.lease_name.clone(),
                identity: identity.clone(),
                duration: args.lease_duration.0,
            },
        );
        let leadership = elector.leadership();
        if !elector.acquire(cancel).await {
            tracing::info!("shutting down before leadership was acquired");
            return Ok(ExitCode::SUCCESS);
        }
        self.metrics.set_leader(true);
        let leader_cancel = cancel.child_token();
        tasks.spawn(elector.hold(leader_cancel.clone()));
        {
            // Losing the lease stops leader-only work at once.
            let lost = leadership.lost().clone();
            let leader_cancel = leader_cancel.clone();
            tasks.spawn(async move {
                tokio::select! {
                    () = lost.cancelled() => leader_cancel.cancel(),
                    () = leader_cancel.cancelled() => {}
                }
            });
        }
        self.spawn_leader_work(tasks, &identity, &leadership, &leader_cancel)?;
        Ok(tokio::select! {
            () = cancel.cancelled() => {
                tracing::info!("shutting down");
                ExitCode::SUCCESS
            }
            () = leadership.lost().cancelled() => {
                tracing::error!("leadership lost: exiting");
                ExitCode::from(EXIT_LEADERSHIP_LOST)
            }
        })
    }

    /// The Proxy controller, the monitor, the GC sweeper and (with
    /// `--probe-target`) the health engine, all under `cancel`.
    fn spawn_leader_work(
        &self,
        tasks: &mut JoinSet<()>,
        identity: &str,
        leadership: &crate::leader::Leadership,
        cancel: &CancellationToken,
    ) -> anyhow::Result<()> {
        let args = &self.args;
        let (recovered_tx, recovered_rx) = mpsc::channel(1);
        self.spawn_controller(tasks, identity, recovered_rx, cancel);
        tasks.spawn(
            crate::monitor::Monitor {
                client: self.client.clone(),
                providers: self.providers.clone(),
                interval: args.check_interval.0,
                timeout: args.check_timeout.0,
                recovered: recovered_tx,
                metrics: self.metrics.clone(),
            }
            .run(cancel.child_token()),
        );
        tasks.spawn(
            crate::gc::Sweeper {
                client: self.client.clone(),
                namespace: args.namespace.clone(),
                providers: self.providers.clone(),
                cluster: self.cluster.clone(),
                policy: fleet::gc::GcPolicy {
                    min_age: args.gc_min_age.0,
                    max_deletes: args.gc_max_deletes,
                },
                interval: args.gc_interval.0,
                call_timeout: args.call_timeout.0,
                leadership: leadership.clone(),
                metrics: self.metrics.clone(),
            }
            .run(cancel.child_token()),
        );
        let Some(target) = &args.probe_target else {
            return Ok(());
        };
        let target = fleet::ProbeTarget::parse(target)
            .with_context(|| format!("--probe-target {target:?}"))?;
        let netns = match &args.probe_netns {
            Some(name) => Some(
                crate::netns::Netns::open(name)
                    .with_context(|| format!("--probe-netns {name:?}"))?,
            ),
            None => None,
        };
        tasks.spawn(
            crate::health::Engine {
                client: self.client.clone(),
                proxies: self.proxies.clone(),
                target,
                netns,
                interval: args.probe_interval.0,
                timeout: args.probe_timeout.0,
                concurrency: usize::from(args.concurrency),
                hysteresis: fleet::Hysteresis::default(),
                metrics: self.metrics.clone(),
                changed: self.proxies_changed.clone(),
            }
            .run(cancel.child_token()),
        );
        Ok(())
    }

    fn spawn_controller(
        &self,
        tasks: &mut JoinSet<()>,
        identity: &str,
        recovered: mpsc::Receiver<()>,
        cancel: &CancellationToken,
    ) {
        let (args, client) = (&self.args, &self.client);
        let (trigger_tx, trigger_rx) = mpsc::channel(TRIGGER_QUEUE);
        let mut policy = fleet::Policy::default();
        policy.replace_unhealthy_after = self.args.replace_unhealthy_after.0;
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            reconciler: fleet::Reconciler::new(policy, self.cluster.clone()),
            providers: self.providers.clone(),
            provider_names: self.provider_names.clone(),
            recorder: Recorder::new(
                client.clone(),
                Reporter {
                    controller: "egress-proxies-operator".into(),
                    instance: Some(identity.to_owned()),
                },
            ),
            tasks: ProviderTasks::new(
                usize::from(args.concurrency),
                trigger_tx,
                self.metrics.provider_tasks().clone(),
            ),
            metrics: self.metrics.clone(),
            timeouts: Timeouts {
                create: args.create_timeout.0,
                call: args.call_timeout.0,
                reconcile_wait: args.reconcile_wait.0,
            },
        });
        let api = proxy_api(client, args.namespace.as_deref());
        let controller = Controller::new(api, watcher::Config::default())
            .with_config(controller::Config::default().concurrency(args.concurrency))
            .reconcile_on(crate::reconciler::receiver_stream(trigger_rx))
            .reconcile_all_on(crate::reconciler::receiver_stream(recovered))
            .graceful_shutdown_on(cancel.clone().cancelled_owned());
        let store = controller.store();
        let run_ctx = ctx.clone();
        let stream = controller
            .run(
                crate::reconciler::reconcile,
                crate::reconciler::error_policy,
                run_ctx,
            )
            .for_each(|r| async move {
                if let Err(e) = r {
                    match e {
                        controller::Error::ReconcilerFailed(_, _) => {}
                        e => tracing::warn!(error = %chain(&e), "controller"),
                    }
                }
            });
        let cancel = cancel.clone();
        tasks.spawn(async move {
            // Forget Proxies gone without a final reconcile, once a minute.
            let sweep = async {
                loop {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    let live: std::collections::HashSet<String> = store
                        .state()
                        .iter()
                        .filter_map(|p| p.metadata.uid.clone())
                        .collect();
                    ctx.tasks.retain(|uid| live.contains(uid));
                }
            };
            tokio::select! {
                () = stream => {}
                () = sweep => {}
                // The controller stops on its own (graceful shutdown); this bounds it.
                () = async { cancel.cancelled().await; tokio::time::sleep(Duration::from_secs(10)).await } => {}
            }
            ctx.tasks.shutdown();
        });
    }
}

/// The Proxy watch cache every replica keeps (discovery reads it), the
/// readiness flag it sets once synced, and `changed`, notified on each
/// change.
fn spawn_proxy_cache(
    tasks: &mut JoinSet<()>,
    api: Api<Proxy>,
    writer: reflector::store::Writer<Proxy>,
    state: Arc<HttpState>,
    changed: Arc<tokio::sync::Notify>,
    cancel: &CancellationToken,
) {
    let watch_cancel = cancel.child_token();
    let stream = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .for_each(move |event| {
            match event {
                // The health engine's reset pass (one pending wake at most).
                Ok(_) => changed.notify_one(),
                Err(e) => tracing::warn!(error = %chain(&e), "proxy watch error (retrying)"),
            }
            std::future::ready(())
        });
    tasks.spawn(async move {
        tokio::select! {
            () = watch_cancel.cancelled() => {}
            () = stream => {}
        }
    });
    let cancel = cancel.child_token();
    tasks.spawn(async move {
        tokio::select! {
            () = cancel.cancelled() => {}
            r = state.proxies.wait_until_ready() => if r.is_ok() {
                state.ready.store(true, Ordering::Release);
                tracing::info!("proxy watch cache synced");
            },
        }
    });
}

fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "operator".to_owned());
    format!("{host}-{}", std::process::id())
}

async fn wait_for_signal(cancel: &CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot install signal handlers");
        cancel.cancelled().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
        () = cancel.cancelled() => {}
    }
}

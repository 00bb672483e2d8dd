//! `operator run`: composes the pieces under one cancellation token.
//!
//! ```text
//!  every replica, for the process's life:
//!    HTTP server (/metrics /healthz /readyz /proxies), Proxy watch cache
//!
//!  leadership terms, one at a time (Replica::serve):
//!    campaign ──won──▶ term: its own JoinSet and token — lease renewal,
//!       ▲              Proxy controller, monitor, GC sweeper, health engine
//!       │                   │ lease lost
//!       │                   ▼
//!       └──────── term aborted at once, its tasks awaited (TERM_END_BOUND;
//!                 past it: exit 3, EXIT_TERM_STUCK)
//!
//!  SIGTERM/SIGINT ─▶ cancel ─▶ the campaign ends (also mid-attempt), or the
//!                              term stops gracefully (the lease still
//!                              renewed) and only then releases the lease;
//!                              then the rest; all within --shutdown-timeout
//! ```
//!
//! Losing the Lease keeps the process, its watch cache and its probes: an
//! API server outage costs a term, not a container restart (whose backoff
//! grows with every outage). Invariant 15: leader-only work is *aborted*,
//! not drained — an in-flight reconcile must not finish its writes once
//! another replica may lead (the elector declares the loss by the end of
//! the validity, a margin before anyone else can take the Lease) — and
//! nothing of a term outlives it: the next term starts only after every
//! task and provider call of the last one ended, so two terms never
//! overlap; the process's own state (provider connections,
//! the Proxy cache, metrics) carries over, each term's controller state
//! (its watch, step memory, per-Proxy tasks) starts afresh, as a new
//! leader's would.
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
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::RegistryFn;
use crate::cli::{HttpAuth, RunArgs};
use crate::crd::Proxy;
use crate::gc::proxy_api;
use crate::http::HttpState;
use crate::http::auth::{Auth, Reviewer};
use crate::leader::{Elector, LeaseConfig, RELEASE_BOUND};
use crate::metrics::OperatorMetrics;
use crate::reconciler::{Ctx, ProviderTasks, Timeouts};

/// Exit status when the tasks of a lost term did not end within
/// [`TERM_END_BOUND`] of being aborted: leading again beside them could
/// overlap two terms, so the process exits and its restart ends them.
const EXIT_TERM_STUCK: u8 = 3;
/// How long the aborted tasks of a lost term may take to end (aborted tasks
/// end at their next await; only a task blocking its thread takes longer).
const TERM_END_BOUND: Duration = Duration::from_secs(5);
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

/// The API client, counting its requests
/// (`operator_api_requests_total`).
async fn client(args: &RunArgs, metrics: &OperatorMetrics) -> anyhow::Result<Client> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("read kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    let builder = kube::client::ClientBuilder::try_from(config)?;
    Ok(builder
        .with_layer(&crate::metrics::CountApiRequests(metrics.clone()))
        .build())
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
    // Spans go out from here on (when a collector is configured); the
    // last ones are flushed, bounded, after everything else stopped.
    let exporter = crate::telemetry::otlp::start();
    let result = run_until(args, registry, tasks, &cancel).await;
    if let Some(exporter) = exporter {
        exporter.shutdown().await;
    }
    result
}

/// Runs the operator until `cancel` fires, then shuts down within
/// `--shutdown-timeout`; `tasks` holds what already runs (the signal
/// handler).
async fn run_until(
    args: RunArgs,
    registry: RegistryFn,
    mut tasks: JoinSet<()>,
    cancel: &CancellationToken,
) -> anyhow::Result<ExitCode> {
    // Starting waits on the API server (kube's own timeouts are minutes):
    // a SIGTERM meanwhile stops it. On error or cancel the set is dropped,
    // which aborts what started.
    let started = tokio::select! {
        r = Replica::start(args, registry, &mut tasks, cancel) => Some(r?),
        () = cancel.cancelled() => None,
    };
    let Some(replica) = started else {
        tracing::info!("shutting down while starting");
        return Ok(ExitCode::SUCCESS);
    };
    let (exit, term) = replica.serve(cancel).await;
    replica.metrics.set_leader(false);
    cancel.cancel();
    // One bound for the whole shutdown: the term first (it releases the
    // lease), then what every replica runs (already ending meanwhile).
    let deadline = Instant::now() + replica.args.shutdown_timeout.0;
    if let Some(term) = term {
        term.drain(deadline).await;
    }
    drain(tasks, deadline).await;
    tracing::info!("stopped");
    Ok(exit)
}

/// Waits for every task until `deadline`, then aborts what is left.
async fn drain(mut tasks: JoinSet<()>, deadline: Instant) {
    let drained = tokio::time::timeout_at(deadline, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!("shutdown timed out; aborting the remaining tasks");
        tasks.abort_all();
    }
}

/// One leadership term's work: its tasks (Proxy controller, monitor, GC
/// sweeper, health engine), the provider calls its controller started
/// (owned by the controller's context, which aborts them when it is dropped
/// with the controller's task; tracked here) and, apart from them, the
/// Lease's renewal, which releases the Lease when `release` fires.
struct Term {
    tasks: JoinSet<()>,
    calls: TaskTracker,
    lease: JoinSet<()>,
    release: CancellationToken,
    lost: CancellationToken,
}

impl Term {
    /// Aborts everything at once and waits at most `bound` until every task
    /// and every provider call has ended; whether they all did.
    async fn abort(self, bound: Duration) -> bool {
        let Term {
            mut tasks,
            calls,
            mut lease,
            ..
        } = self;
        tasks.abort_all();
        lease.abort_all();
        calls.close();
        tokio::time::timeout(bound, async {
            while tasks.join_next().await.is_some() {}
            while lease.join_next().await.is_some() {}
            calls.wait().await;
        })
        .await
        .is_ok()
    }

    /// Stops gracefully (the work's token is cancelled already: the
    /// controller finishes its passes), then releases the Lease — only then
    /// (invariant 15: a successor may start the moment it is free). The
    /// work gets until `deadline` less [`RELEASE_BOUND`]; past it, or when
    /// the Lease is lost meanwhile, it is aborted. Work that will not end
    /// even then keeps the Lease unreleased: the successor waits out its
    /// duration instead of overlapping it.
    async fn drain(self, deadline: Instant) {
        let Term {
            mut tasks,
            calls,
            mut lease,
            release,
            lost,
        } = self;
        calls.close();
        let work_deadline = deadline
            .checked_sub(RELEASE_BOUND)
            .unwrap_or(deadline)
            .max(Instant::now());
        let ended = tokio::select! {
            r = tokio::time::timeout_at(work_deadline, async {
                while tasks.join_next().await.is_some() {}
                calls.wait().await;
            }) => r.is_ok(),
            () = lost.cancelled() => {
                tracing::warn!("leadership lost while stopping: the term's work is aborted");
                false
            }
        };
        if !ended {
            tasks.abort_all();
            let aborted = tokio::time::timeout_at(deadline, async {
                while tasks.join_next().await.is_some() {}
                calls.wait().await;
            })
            .await
            .is_ok();
            if !aborted {
                tracing::warn!(
                    "shutdown timed out with the term's work still ending; the lease is left to expire"
                );
                lease.abort_all();
                return;
            }
        }
        release.cancel();
        if tokio::time::timeout_at(deadline, async {
            while lease.join_next().await.is_some() {}
        })
        .await
        .is_err()
        {
            tracing::warn!("shutdown timed out releasing the lease");
            lease.abort_all();
        }
    }
}

/// The health engine's probe settings (each entry's `probe_target`,
/// `--probe-target`, `--probe-netns`), checked once at start.
struct ProbeSettings {
    targets: crate::health::ProbeTargets,
    netns: Option<crate::netns::Netns>,
}

impl ProbeSettings {
    fn new(args: &RunArgs, config: &provider_api::ProvidersConfig) -> anyhow::Result<Self> {
        let targets = probe_targets(config, args.probe_target.as_deref())?;
        let netns = match &args.probe_netns {
            Some(name) => Some(
                crate::netns::Netns::open(name)
                    .with_context(|| format!("--probe-netns {name:?}"))?,
            ),
            None => None,
        };
        Ok(Self { targets, netns })
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
    /// The Proxies the watch cache saw change (the health engine's reset
    /// passes look at these only).
    proxies_changed: Arc<crate::proxy_changes::ProxyChanges>,
    /// The watch cache's changes handed on to a term's controllers (one
    /// Proxy watch per process).
    proxy_feed: Arc<crate::proxy_feed::ProxyFeed>,
    /// Notified on every change the Proxy watch cache sees (the Service
    /// sync waits on it).
    services_changed: Arc<tokio::sync::Notify>,
    /// The health engine's settings.
    probe: ProbeSettings,
    /// Each entry's hosts from the monitor's latest check (pool spread).
    hosts: crate::pool::HostBook,
    /// The fleet gauges `/metrics` serves (each term hands them its view).
    gauges: crate::metrics::FleetGauges,
    /// Consumer leases (the leader's term runs their sweeper).
    leases: crate::leases::ConsumerLeases,
}

/// Each entry's `probe_target`, and `--probe-target` over all of them.
fn probe_targets(
    config: &provider_api::ProvidersConfig,
    all: Option<&str>,
) -> anyhow::Result<crate::health::ProbeTargets> {
    let mut targets = crate::health::ProbeTargets::default();
    for entry in &config.providers {
        let text = entry.probe_target().to_string();
        let target = fleet::ProbeTarget::parse(&text)
            .with_context(|| format!("providers[{}].proxy.probe_target {text:?}", entry.name))?;
        targets.by_entry.insert(entry.name.to_string(), target);
        if let Some(file) = entry.proxy().credentials_file.as_ref() {
            targets
                .credentials_files
                .insert(entry.name.to_string(), file.as_path().to_owned());
        }
    }
    let default = provider_api::config::DEFAULT_PROBE_TARGET;
    targets.existing = Some(
        fleet::ProbeTarget::parse(default)
            .with_context(|| format!("default probe target {default:?}"))?,
    );
    if let Some(all) = all {
        targets.all = Some(
            fleet::ProbeTarget::parse(all).with_context(|| format!("--probe-target {all:?}"))?,
        );
    }
    Ok(targets)
}

impl Replica {
    /// Loads the providers, checks the probe settings, reaches the API
    /// server and starts what every replica runs for the process's life:
    /// HTTP (metrics, probes, discovery) and the Proxy watch cache.
    async fn start(
        args: RunArgs,
        registry: RegistryFn,
        tasks: &mut JoinSet<()>,
        cancel: &CancellationToken,
    ) -> anyhow::Result<Self> {
        let (config, providers) = crate::providers::load(&args.providers_config, registry)?;
        let mut registry = crate::metrics::registry();
        let ours = crate::metrics::ours(&mut registry);
        let provider_metrics = provider_api::ProviderMetrics::new(ours);
        let metrics = OperatorMetrics::new(ours);
        let providers = providers.instrumented(&provider_metrics);
        let provider_names: BTreeSet<_> = config.providers.iter().map(|p| p.name.clone()).collect();
        let probe = ProbeSettings::new(&args, &config)?;
        let (reader, writer) = reflector::store::<Proxy>();
        let hosts = crate::pool::HostBook::new(
            providers
                .iter()
                .filter(|p| p.checker().is_some())
                .map(|p| p.name().to_string()),
        );
        let gauges = crate::metrics::FleetGauges::new(
            reader.clone(),
            hosts.clone(),
            providers.iter().cloned(),
        );
        crate::metrics::ours(&mut registry).register_collector(Box::new(gauges.clone()));

        let client = client(&args, &metrics).await?;
        let mut cluster = cluster_identity(&client, args.cluster_id.as_deref()).await?;
        // Seeing one namespace's Proxies, the GC judges only instances made
        // for that namespace (another operator may own the rest).
        if let Some(ns) = args.namespace.as_deref() {
            cluster = cluster
                .scoped_to(ns)
                .with_context(|| format!("--namespace {ns:?}"))?;
        }
        tracing::info!(cluster = cluster.as_str(), namespace = args.namespace.as_deref().unwrap_or("(all)"), providers = ?provider_names, "starting");

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
        let leases = spawn_consumer_lease_cache(tasks, &client, &args, &reader, &metrics, cancel);
        let state = Arc::new(HttpState {
            registry,
            proxies: reader.clone(),
            ready: false.into(),
            auth,
            metrics: metrics.clone(),
            leases: leases.clone(),
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
        let proxies_changed = crate::proxy_changes::ProxyChanges::new();
        let services_changed = Arc::new(tokio::sync::Notify::new());
        let proxy_feed = crate::proxy_feed::ProxyFeed::new();
        spawn_proxy_cache(
            tasks,
            api,
            writer,
            state,
            CacheListeners {
                changed: proxies_changed.clone(),
                services: services_changed.clone(),
                feed: proxy_feed.clone(),
            },
            cancel,
        );
        Ok(Self {
            args,
            client,
            providers,
            provider_names,
            cluster,
            metrics,
            proxies: reader,
            proxies_changed,
            proxy_feed,
            services_changed,
            probe,
            hosts,
            gauges,
            leases,
        })
    }

    /// Campaigns for the Lease, leads until it is lost, and campaigns
    /// again, until `cancel` fires. Returns the exit status and, when
    /// `cancel` came during a term, that term, stopping gracefully (the
    /// caller drains it under the shutdown bound).
    async fn serve(&self, cancel: &CancellationToken) -> (ExitCode, Option<Term>) {
        let args = &self.args;
        let identity = args.identity.clone().unwrap_or_else(default_identity);
        let leases = Api::<Lease>::namespaced(self.client.clone(), &args.lease_namespace);
        let config = LeaseConfig {
            name: args.lease_name.clone(),
            identity: identity.clone(),
            duration: args.lease_duration.0,
        };
        loop {
            let mut elector = Elector::new(leases.clone(), config.clone());
            let leadership = elector.leadership();
            if !elector.acquire(cancel).await {
                tracing::info!("shutting down while campaigning");
                return (ExitCode::SUCCESS, None);
            }
            self.metrics.set_leader(true);
            let term_cancel = cancel.child_token();
            let term = self.start_term(elector, &identity, &leadership, &term_cancel);
            tokio::select! {
                () = cancel.cancelled() => {
                    tracing::info!("shutting down");
                    return (ExitCode::SUCCESS, Some(term));
                }
                () = leadership.lost().cancelled() => {}
            }
            // Invariant 15: aborted, not drained (an in-flight reconcile
            // must not finish its writes once another replica may lead),
            // and ended before the next campaign.
            self.metrics.set_leader(false);
            self.metrics.leadership_lost();
            term_cancel.cancel();
            if !term.abort(TERM_END_BOUND).await {
                tracing::error!(bound = ?TERM_END_BOUND, "leadership lost and its work did not end in time: exiting");
                return (ExitCode::from(EXIT_TERM_STUCK), None);
            }
            tracing::warn!("leadership lost: leader-only work stopped; campaigning again");
        }
    }

    /// Starts one term under `cancel`: the lease renewal, the Proxy
    /// controller, the monitor, the GC sweeper, the consumer lease sweeper
    /// and the health engine.
    fn start_term(
        &self,
        elector: Elector,
        identity: &str,
        leadership: &crate::leader::Leadership,
        cancel: &CancellationToken,
    ) -> Term {
        // The renewal is not under `cancel`: on shutdown it goes on until
        // the term's work has ended, then releases (`Term::drain`).
        let release = CancellationToken::new();
        let mut lease = JoinSet::new();
        lease.spawn(elector.hold(release.clone()));
        let mut term = JoinSet::new();
        let args = &self.args;
        let (recovered_tx, recovered_rx) = mpsc::channel(1);
        let calls = self.spawn_controller(&mut term, identity, recovered_rx, cancel);
        term.spawn(
            crate::monitor::Monitor {
                client: self.client.clone(),
                providers: self.providers.clone(),
                interval: args.check_interval.0,
                timeout: args.check_timeout.0,
                recovered: recovered_tx,
                metrics: self.metrics.clone(),
                hosts: self.hosts.clone(),
            }
            .run(cancel.child_token()),
        );
        let pools = self.spawn_pool_controller(&mut term, identity, cancel);
        self.gauges.lead(crate::metrics::LeaderView {
            leadership: leadership.clone(),
            pools: pools.clone(),
        });
        if args.services {
            term.spawn(
                crate::services::ServiceSync {
                    client: self.client.clone(),
                    proxies: self.proxies.clone(),
                    pools,
                    namespace: args.namespace.clone(),
                    changed: self.services_changed.clone(),
                    metrics: self.metrics.clone(),
                }
                .run(cancel.child_token()),
            );
        }
        term.spawn(
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
        term.spawn(
            self.leases
                .clone()
                .sweeper(args.namespace.clone(), cancel.child_token()),
        );
        term.spawn(
            crate::health::Engine {
                client: self.client.clone(),
                proxies: self.proxies.clone(),
                targets: self.probe.targets.clone(),
                netns: self.probe.netns.clone(),
                interval: args.probe_interval.0,
                timeout: args.probe_timeout.0,
                concurrency: usize::from(args.concurrency),
                hysteresis: fleet::Hysteresis::default(),
                metrics: self.metrics.clone(),
                changed: self.proxies_changed.clone(),
            }
            .run(cancel.child_token()),
        );
        Term {
            tasks: term,
            calls,
            lease,
            release,
            lost: leadership.lost().clone(),
        }
    }

    /// The Proxy controller of one term; its per-Proxy provider tasks are
    /// owned by its context and aborted when the controller's task ends or
    /// is aborted (the context is dropped with it). Returns their tracker.
    fn spawn_controller(
        &self,
        term: &mut JoinSet<()>,
        identity: &str,
        recovered: mpsc::Receiver<()>,
        cancel: &CancellationToken,
    ) -> TaskTracker {
        let (args, client) = (&self.args, &self.client);
        let (trigger_tx, trigger_rx) = mpsc::channel(TRIGGER_QUEUE);
        let mut policy = fleet::Policy::default();
        policy.replace_unhealthy_after = self.args.replace_unhealthy_after.0;
        policy.host_loss_grace = self.args.host_loss_grace.0;
        let reporter = Reporter {
            controller: "egress-proxies-operator".into(),
            instance: Some(identity.to_owned()),
        };
        let ctx = Arc::new(Ctx {
            client: client.clone(),
            reconciler: fleet::Reconciler::new(policy, self.cluster.clone()),
            providers: self.providers.clone(),
            provider_names: self.provider_names.clone(),
            recorder: Recorder::new(client.clone(), reporter.clone()),
            reporter,
            tasks: ProviderTasks::new(
                usize::from(args.concurrency),
                trigger_tx.clone(),
                self.metrics.provider_tasks().clone(),
            ),
            metrics: self.metrics.clone(),
            timeouts: Timeouts {
                create: args.create_timeout.0,
                call: args.call_timeout.0,
                reconcile_wait: args.reconcile_wait.0,
            },
        });
        // Triggered by the replica's Proxy watch (no watch of its own).
        let changes = self.proxy_feed.subscribe(self.proxies.clone());
        let controller = Controller::for_shared_stream(changes, self.proxies.clone())
            .with_config(controller::Config::default().concurrency(args.concurrency))
            .reconcile_on(crate::reconciler::receiver_stream(trigger_rx))
            .reconcile_all_on(crate::reconciler::receiver_stream(recovered))
            .graceful_shutdown_on(cancel.clone().cancelled_owned());
        let store = controller.store();
        if args.provider_events {
            for provider in self.providers.iter() {
                if let Some(events) = provider.instance_events() {
                    term.spawn(
                        crate::provider_events::Forwarder {
                            provider: provider.name().clone(),
                            events,
                            store: store.clone(),
                            trigger: trigger_tx.clone(),
                            metrics: self.metrics.clone(),
                        }
                        .run(cancel.child_token()),
                    );
                }
            }
        }
        let calls = ctx.tasks.tracker();
        let run_ctx = ctx.clone();
        let stream = controller
            .run(
                crate::reconciler::reconcile,
                crate::reconciler::error_policy,
                run_ctx,
            )
            .for_each(|r| async move {
                if let Err(e) = r {
                    crate::gone::log_controller_error("proxy", e);
                }
            });
        let cancel = cancel.clone();
        term.spawn(async move {
            // The controller waits for its store with kube's own wait,
            // which wakes only its last waiter: the shared cache must be
            // ready before the controller is first polled.
            tokio::select! {
                () = crate::store_ready::ready(&store) => {}
                () = cancel.cancelled() => {
                    ctx.tasks.shutdown();
                    return;
                }
            }
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
        calls
    }
}

impl Replica {
    /// The ProxyPool controller of one term: it reads members from the
    /// Proxy watch cache and is triggered by changes of the Proxies pools
    /// own. Returns its pool cache.
    fn spawn_pool_controller(
        &self,
        term: &mut JoinSet<()>,
        identity: &str,
        cancel: &CancellationToken,
    ) -> reflector::Store<crate::crd::ProxyPool> {
        let ctx = Arc::new(crate::pool::PoolCtx {
            client: self.client.clone(),
            proxies: self.proxies.clone(),
            hosts: self.hosts.clone(),
            recorder: Recorder::new(
                self.client.clone(),
                Reporter {
                    controller: "egress-proxies-operator".into(),
                    instance: Some(identity.to_owned()),
                },
            ),
            metrics: self.metrics.clone(),
            issued: crate::pool::Issued::default(),
        });
        let namespace = self.args.namespace.as_deref();
        let pools: Api<crate::crd::ProxyPool> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        // Members from the replica's Proxy watch (no watch of its own):
        // a change of a Proxy a pool controls triggers that pool.
        let members = self.proxy_feed.subscribe(self.proxies.clone());
        let controller = Controller::new(pools, watcher::Config::default())
            .owns_shared_stream(members)
            .with_config(controller::Config::default().concurrency(self.args.concurrency))
            .graceful_shutdown_on(cancel.clone().cancelled_owned());
        let store = controller.store();
        let stream = controller
            .run(crate::pool::reconcile, crate::pool::error_policy, ctx)
            .for_each(|r| async move {
                if let Err(e) = r {
                    crate::gone::log_controller_error("pool", e);
                }
            });
        let cancel = cancel.clone();
        let proxies = self.proxies.clone();
        term.spawn(async move {
            // A pass reads members from the Proxy cache: not before it has
            // synced (a pass on an empty cache would make every member
            // again, each answered "exists").
            tokio::select! {
                () = crate::store_ready::ready(&proxies) => {}
                () = cancel.cancelled() => return,
            }
            tokio::select! {
                () = stream => {}
                // The controller stops on its own (graceful shutdown); this bounds it.
                () = async { cancel.cancelled().await; tokio::time::sleep(Duration::from_secs(10)).await } => {}
            }
        });
        store
    }
}

/// Who hears of the Proxy watch cache's changes.
struct CacheListeners {
    /// The health engine's reset pass (the Proxies that changed).
    changed: Arc<crate::proxy_changes::ProxyChanges>,
    /// The Service sync (one pending wake at most).
    services: Arc<tokio::sync::Notify>,
    /// A term's controllers.
    feed: Arc<crate::proxy_feed::ProxyFeed>,
}

/// The Proxy watch cache every replica keeps (discovery, the health
/// engine and a term's controllers read it), the readiness flag it sets
/// once synced; each change goes to `listeners`.
fn spawn_proxy_cache(
    tasks: &mut JoinSet<()>,
    api: Api<Proxy>,
    writer: reflector::store::Writer<Proxy>,
    state: Arc<HttpState>,
    listeners: CacheListeners,
    cancel: &CancellationToken,
) {
    let watch_cancel = cancel.child_token();
    let store = writer.as_reader();
    let stream = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .for_each(move |event| {
            match event {
                Ok(event) => {
                    listeners.changed.record(&event);
                    listeners.services.notify_one();
                    listeners.feed.record(&store, &event);
                }
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
            () = crate::store_ready::ready(&state.proxies) => {
                state.ready.store(true, Ordering::Release);
                tracing::info!("proxy watch cache synced");
            },
        }
    });
}

/// The watch cache of consumer Leases (in the operator's namespace, by
/// their label) and the leases served from it and the Proxy cache.
fn spawn_consumer_lease_cache(
    tasks: &mut JoinSet<()>,
    client: &Client,
    args: &RunArgs,
    proxies: &reflector::Store<Proxy>,
    metrics: &OperatorMetrics,
    cancel: &CancellationToken,
) -> crate::leases::ConsumerLeases {
    let api = Api::<Lease>::namespaced(client.clone(), &args.lease_namespace);
    let (reader, writer) = reflector::store::<Lease>();
    let config =
        watcher::Config::default().labels(&format!("{}=true", fleet::consumer_lease::LABEL));
    let stream = reflector(writer, watcher(api.clone(), config))
        .default_backoff()
        .for_each(|event| {
            if let Err(e) = event {
                tracing::warn!(error = %chain(&e), "consumer lease watch error (retrying)");
            }
            std::future::ready(())
        });
    let cancel = cancel.child_token();
    tasks.spawn(async move {
        tokio::select! {
            () = cancel.cancelled() => {}
            () = stream => {}
        }
    });
    crate::leases::ConsumerLeases::new(
        api,
        args.lease_namespace.clone(),
        reader,
        proxies.clone(),
        metrics.clone(),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Aborts the call it owns when dropped (as a term's controller owns
    /// its provider calls).
    struct Owns(tokio::task::JoinHandle<()>);

    impl Drop for Owns {
        fn drop(&mut self) {
            self.0.abort();
        }
    }

    #[tokio::test]
    async fn sigterm_while_starting_stops_at_once() {
        // An API server that accepts and never answers: starting waits on
        // it (the cluster identity read) for kube's own read timeout.
        let silent = testkit::silent::Silent::start().await;
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{}\n\
                 contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
                 current-context: c\nusers:\n- name: u\n  user: {{}}\n",
                silent.port()
            ),
        )
        .unwrap();
        let config = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../deploy/providers-config.yaml"
        );
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "operator",
            "run",
            "--providers-config",
            config,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--http-addr",
            "127.0.0.1:0",
        ])
        .unwrap();
        let crate::cli::Command::Run(args) = cli.command else {
            panic!("not run");
        };
        let cancel = CancellationToken::new();
        let signal = {
            let cancel = cancel.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                cancel.cancel();
            }
        };
        let start = std::time::Instant::now();
        let (code, ()) = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::join!(
                run_until(*args, crate::providers::registry, JoinSet::new(), &cancel),
                signal
            )
        })
        .await
        .expect("SIGTERM while starting was not honoured");
        assert_eq!(code.unwrap(), ExitCode::SUCCESS);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert!(silent.accepted() >= 1, "the start never reached the server");
    }

    /// A term of `tasks` and `calls` whose Lease renewal does nothing.
    fn term_of(tasks: JoinSet<()>, calls: TaskTracker) -> Term {
        Term {
            tasks,
            calls,
            lease: JoinSet::new(),
            release: CancellationToken::new(),
            lost: CancellationToken::new(),
        }
    }

    #[tokio::test]
    async fn the_lease_is_released_only_after_the_terms_work_ended() {
        use std::sync::atomic::AtomicBool;
        // What `serve` does on SIGTERM: the work's token (a child of the
        // process's) is cancelled; the controller finishes its passes.
        let work = CancellationToken::new();
        let done = Arc::new(AtomicBool::new(false));
        let mut tasks = JoinSet::new();
        {
            let (work, done) = (work.clone(), done.clone());
            tasks.spawn(async move {
                work.cancelled().await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                done.store(true, Ordering::SeqCst);
            });
        }
        let calls = TaskTracker::new();
        let (call_tx, call_rx) = tokio::sync::oneshot::channel::<()>();
        calls.spawn(async move {
            let _ = call_rx.await;
        });
        let mut term = term_of(tasks, calls);
        let released_after_work = Arc::new(std::sync::Mutex::new(None));
        {
            let (release, done, seen) = (
                term.release.clone(),
                done.clone(),
                released_after_work.clone(),
            );
            term.lease.spawn(async move {
                release.cancelled().await;
                *seen.lock().unwrap() = Some(done.load(Ordering::SeqCst));
            });
        }
        work.cancel();
        // The call ends with the controller (its owner), after the work.
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            let _ = call_tx.send(());
        });
        term.drain(Instant::now() + Duration::from_secs(10)).await;
        assert_eq!(
            *released_after_work.lock().unwrap(),
            Some(true),
            "the Lease was released while the term's work still ran (or never)"
        );
    }

    #[tokio::test]
    async fn losing_the_lease_while_stopping_aborts_the_terms_work() {
        let mut tasks = JoinSet::new();
        // Work that would finish its passes only at the deadline.
        tasks.spawn(std::future::pending());
        let term = term_of(tasks, TaskTracker::new());
        let lost = term.lost.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            lost.cancel();
        });
        let start = std::time::Instant::now();
        tokio::time::timeout(
            Duration::from_secs(5),
            term.drain(Instant::now() + Duration::from_secs(30)),
        )
        .await
        .expect("the work was not aborted when the Lease was lost");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[tokio::test]
    async fn aborting_a_term_ends_its_tasks_and_the_calls_they_own() {
        let calls = TaskTracker::new();
        let owned = Owns(calls.spawn(std::future::pending()));
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let _owned = owned;
            std::future::pending::<()>().await;
        });
        tasks.spawn(std::future::pending());
        let term = term_of(tasks, calls.clone());
        assert!(term.abort(Duration::from_secs(5)).await);
        assert!(calls.is_empty(), "a provider call outlived its term");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_term_that_will_not_end_is_reported_within_the_bound() {
        let mut tasks = JoinSet::new();
        // Blocks its thread: an abort cannot reach it until it returns.
        tasks.spawn(async { std::thread::sleep(Duration::from_secs(2)) });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let term = term_of(tasks, TaskTracker::new());
        let start = std::time::Instant::now();
        assert!(!term.abort(Duration::from_millis(300)).await);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
    }
}

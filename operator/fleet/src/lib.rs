//! The egress-proxies operator's decisions that are not about Kubernetes.
//!
//! The operator binary is kube-rs glue: it watches `Proxy` objects, writes
//! status by server-side apply, records Events, holds the lease and serves
//! HTTP. Every *decision* it makes lives here, as pure functions of their
//! inputs (and one state machine, the CONNECT [`Probe`], fed the bytes the
//! operator reads), so each is table-tested without an API server, a
//! hypervisor or a socket.
//!
//! ```text
//!                         operator (kube-rs glue)
//!   Proxy watch ─┐      ┌─ status (SSA) / Events / finalizer / requeue
//!                ▼      │
//!          ┌──── Reconciler::step ◀── Outcome (provider result) ──┐
//!          │   spec, status, Memory, clock, jitter                │
//!          └──▶ Next::Call(Create | Get | Delete) ── provider-api ┘
//!
//!   GC sweeper:  gc::plan(live Proxies, list_by_tag per entry, cluster tag)
//!                  → deletes (orphans, duplicates) | skip (partial, empty)
//!   health:      Probe(ip:port, CONNECT target) ⇄ operator's socket + clock
//!                  → ProbeOutcome → HealthTracker (K/M) → Healthy condition
//!   monitor:     provider_health(Checker::check results) → ProviderHealth
//!   discovery:   discover(DiscoveredProxy…, query) → JSON response
//!   access:      BearerToken, Question → (API server's answers) → Scope;
//!                TtlCache keeps the answers for a while
//!   consumer leases: consumer_lease::candidates(discovery view, held) → grant
//!                order; judge(stored Record, proxy now) → renew | ended why
//! ```
//!
//! What it holds:
//! * the status model the CRDs are made of ([`ProxySpec`], [`ProxyStatus`],
//!   [`Condition`], [`Phase`], [`Reason`] with its [`ReasonCategory`],
//!   [`ProviderHealthStatus`]), all plain serde types with the CRDs' field
//!   names whose derived JSON schemas are the CRDs' schemas (doc comments
//!   are their descriptions), and [`Timestamp`] for RFC 3339 times;
//! * the reconcile step ([`Reconciler`]): create when absent, record the
//!   provider ID at once, poll, per-class error handling, replacement under
//!   a [`ReplaceCap`], the address grace, spec immutability, cloud-init
//!   Secret checks, deletion with a documented escape hatch
//!   ([`ABANDON_ANNOTATION`]); [`Backoff`] with caller-drawn [`Jitter`];
//! * the GC plan ([`gc::plan`]) scoped by the [`ClusterIdentity`] tag;
//! * health: the CONNECT [`Probe`] (request, status line, verdict) and the
//!   [`HealthTracker`] hysteresis;
//! * [`provider_health`] and [`discovery`];
//! * [`access`]: who may read discovery and metrics (the bearer token, the
//!   questions asked about its holder, the namespaces the answers open) and
//!   the [`TtlCache`] the answers are kept in;
//! * [`consumer_lease`]: leases for consumers (requests, the stored record,
//!   which proxy to grant, whether a renewal stands, what the sweeper ends).
//!
//! What it deliberately does not do: talk to Kubernetes (no kube types; the
//! status model derives `schemars::JsonSchema`, and the operator turns that
//! into the CRDs' schemas), talk to a provider (it returns
//! the [`Call`] to make; the operator makes it under a deadline), open
//! sockets or files, spawn tasks, or read clocks and random numbers (both
//! are parameters, so every decision is reproducible). It depends on no
//! async runtime; a test (`tests/it/sans_io.rs`) keeps it so.
//!
//! # Example: a Proxy from nothing to Running, then a GC round
//!
//! ```
//! use std::collections::BTreeSet;
//! use std::time::{Duration, SystemTime};
//!
//! use fleet::gc::{self, GcPolicy, LiveProxy, LiveSet, Listing};
//! use fleet::*;
//! use provider_api::{Identifier, Instance, InstanceState};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = ClusterIdentity::parse("cluster-a")?;
//! let reconciler = Reconciler::new(Policy::default(), cluster.clone());
//! let meta = ProxyMeta {
//!     namespace: "team-a".into(),
//!     name: "egress-1".into(),
//!     uid: "6f1c2a3e-1b2c-4d5e-8f90-0123456789ab".into(),
//!     generation: 1,
//!     deleting: false,
//!     abandon: false,
//!     pool_member: false,
//! };
//! let spec = ProxySpec { provider: "kvm2-home".into(), ..ProxySpec::default() };
//! let providers: BTreeSet<Identifier> = [Identifier::parse("kvm2-home")?].into();
//! let now = SystemTime::now();
//!
//! let mut status = ProxyStatus::default();
//! let mut memory = Memory::default();
//! let mut outcome = None;
//! let requeue = loop {
//!     let step = reconciler.step(StepInput {
//!         meta: &meta,
//!         spec: &spec,
//!         status: &status,
//!         memory: &memory,
//!         user_data: &UserDataRead::NotRequested,
//!         providers: &providers,
//!         outcome: outcome.take(),
//!         now,
//!         jitter: Jitter::NONE,
//!     });
//!     (status, memory) = (step.status, step.memory); // the operator applies status here
//!     match step.next {
//!         // The operator would call the provider; here it answers at once.
//!         Next::Call(Call::Create { request, .. }) => {
//!             assert!(cluster.marks(&request.tags));
//!             let id = provider_api::ProviderId::parse("kvm2://kvm2-home/host1/ep-e7749fc11676e12e")?;
//!             let ip = Some("10.0.0.7".parse()?);
//!             outcome = Some(Outcome::Created(Ok(Instance::new(id, InstanceState::Running, ip, Some(now)))));
//!         }
//!         Next::Requeue(after) => break after,
//!         other => panic!("unexpected {other:?}"),
//!     }
//! };
//! assert_eq!(status.phase, Some(Phase::Running));
//! assert_eq!(status.condition_reason(ConditionType::Ready), Some(Reason::Running));
//! assert_eq!(requeue, Duration::from_secs(60));
//!
//! // GC: this Proxy claims its instance; nothing is deleted.
//! let live = [LiveProxy::new(meta.uid.as_str(), status.provider_id.as_deref())];
//! let listings: [Listing; 0] = [];
//! let plan = gc::plan(LiveSet::Complete(&live), &listings, &cluster, &GcPolicy::default(), now);
//! assert!(plan.deletes.is_empty());
//! # Ok(())
//! # }
//! ```

pub mod access;
mod backoff;
mod cluster;
pub mod consumer_lease;
pub mod discovery;
mod error;
mod event;
pub mod gc;
mod health;
pub mod pool;
mod probe;
mod provider_health;
mod reason;
mod reconcile;
mod replace_cap;
pub mod service;
mod spec;
mod status;
mod time;
mod ttl_cache;
mod user_data;

pub use backoff::{Backoff, Jitter};
pub use cluster::{CLUSTER_TAG_KEY, ClusterIdentity, NAMESPACE_TAG_KEY, namespace_tag};
pub use discovery::{DiscoveredProxy, DiscoveryQuery, DiscoveryResponse, discover};
pub use error::Error;
pub use event::{Event, EventKind, EventReason};
pub use health::{
    HealthPlan, HealthTracker, Hysteresis, Written as HealthWritten, plan as health_plan,
    verdict_to_write as health_verdict_to_write,
};
pub use probe::{
    FailureKind, MAX_PROBE_TIMEOUT, MAX_STATUS_LINE, Probe, ProbeFailure, ProbeOutcome,
    ProbeTarget, parse_status_line,
};
pub use provider_health::{LATENCY_TOLERANCE, ProviderHealthStatus, TargetHealth, provider_health};
pub use reason::{Reason, ReasonCategory};
pub use reconcile::{
    ABANDON_ANNOTATION, AddressGrace, Call, MAX_CALLS_PER_PASS, Memory, Next, Outcome, Policy,
    ProxyMeta, Reconciler, Step, StepInput, awaits_provider_recovery,
};
pub use replace_cap::{CapVerdict, ReplaceCap};
pub use spec::{
    DEFAULT_USER_DATA_KEY, ExistingProxy, PlacementPolicy, PlacementSpec, ProxySpec, SecretRef,
    SpecIssue, ValidSpec,
};
pub use status::{
    Condition, ConditionStatus, ConditionType, ConditionUpdate, EXISTING_INSTANCE, Phase,
    ProxyStatus,
};
pub use time::Timestamp;
pub use ttl_cache::TtlCache;
pub use user_data::{UserDataProblem, UserDataRead};

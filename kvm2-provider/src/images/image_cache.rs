//! The base image cache: one verified base volume per (provider entry,
//! host, image key), downloaded once and shared by every VM's overlay.
//!
//! ```text
//! ensure(host, key) ─single flight per (host, key), a task of the cache's─▶ loop:
//!   read base, marker, fill lease (shared connection)
//!   marker valid, matches config ─────────────────────▶ Ready: use the base
//!   marker records another URL/sha256/format ─────────▶ Permanent "add a new key" (base kept)
//!   a live lease (another fill, any process) ─────────▶ wait, look again
//!   a provably abandoned lease (heartbeat stale) ─────▶ sweep its unmarked base (if unused), then it
//!   no lease ─▶ create the lease (the lock) ─▶ look again:
//!       debris (base w/o marker, marker w/o base, bad) ─▶ base in use? keep it, Permanent
//!                                                        otherwise delete it (marker first)
//!       fill (dedicated connection, budget, heartbeat on the lease; the fill
//!             stops writing when its beats go unconfirmed: the fence):
//!         GET headers ─▶ free space ≥ size + headroom? else QuotaExceeded
//!         create base-<entry>.<key>.<fmt> empty ─▶ stream the body into it (sha256 while streaming)
//!         verify digest and size ─▶ the lease still ours? ─▶ write the marker  ◀── commit point
//!         ─▶ delete the lease
//! ```
//!
//! **Publish without a copy.** The verified upload *is* the base: it is
//! streamed straight into the base's name, and the marker, written last, is
//! the publish step. Readers never use a base without a valid marker; what
//! keeps them from taking an upload in progress for debris is the fill
//! lease ([`fill_lease`](super::fill_lease)): a base without a marker is
//! swept only when no lease exists or its lease is provably abandoned.
//! The image is written once per cold fill (the earlier design cloned the
//! upload into the base name, writing it twice).
//!
//! **Failures.** A source failure mid-way makes the stream's last read fail,
//! so libvirt-rpc aborts the volume stream instead of finishing it; the
//! unmarked base and the lease are deleted. A budget overrun closes the
//! dedicated connection (SSH first: a frozen link cannot hold it). Clean-up
//! runs on the shared connection within its own bound.
//!
//! **Concurrency.** Within a process, callers needing the same (host, key)
//! share one job ([`SingleFlight`]): five cold Creates start one download.
//! The job runs in a task owned by the cache, bounded by its budgets, so a
//! caller that leaves at its deadline does not cancel it: the next caller
//! joins it. Dropping the cache (the provider) aborts its jobs. Across
//! processes, the lease fences fills: one process fills, the others wait
//! for its marker (or for its lease to be provably abandoned).
//!
//! **Never delete a base in use.** Before any base is deleted (debris, or
//! an abandoned fill's), the pool's volumes and the host's domains are
//! searched for a backing chain or disk naming its file
//! ([`base_users`](super::base_users)); if any does, the base is kept and
//! the call fails Permanent naming them (surfaced in the Proxy's status):
//! restore the marker or move to a new image key.
//!
//! **Edits.** A valid marker whose digest, URL or format differs from the
//! config is a Permanent error telling the operator to add a new key: the
//! base is kept because overlays of running VMs are backed by it.

use provider_api::error::chain;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use provider_api::config::Kvm2Host;
use provider_api::config::{ImageFormat, Kvm2Image};
use provider_api::{Error as ApiError, ErrorClass, Identifier};
use tokio::time::Instant;

use super::base_users::users_of;
use super::fenced_read::FencedRead;
use super::fill_lease::{Fence, Fenced, Lease, LeaseTiming, MAX_LEASE_LEN};
use super::image_marker::{BaseState, ImageMarker, MAX_MARKER_LEN, WantedImage, judge};
use super::image_source::{Download, ImageSource};
use super::pool_space::{self, check_pool_space};
use super::single_flight::{Left, SharedResult, SingleFlight};
use crate::hosts::{Connection, HostTable};
use crate::libvirt::{errors, observed};
use crate::storage::volume_xml::raw_volume;
use crate::storage::{BaseNames, PoolOps};
use libvirt_rpc::proc_num;

/// Budgets of the image cache.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CacheOptions {
    /// Bound on one cold fill: download, upload, verify, marker (default 45
    /// minutes; the download has its own deadline too). A fill that keeps
    /// its lease beating is waited for this long (plus the staleness
    /// window) by other processes; a killed one frees its image after the
    /// staleness window alone ([`LeaseTiming`]).
    pub fill_budget: Duration,
    /// Bound on removing a failed fill's volumes (default 30 s).
    pub cleanup_budget: Duration,
    /// Space left free in the pool beyond the image (default 1 GiB).
    pub headroom: u64,
    /// The fill lease's heartbeat, staleness and polling periods.
    pub lease: LeaseTiming,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            fill_budget: Duration::from_secs(45 * 60),
            cleanup_budget: Duration::from_secs(30),
            headroom: pool_space::DEFAULT_HEADROOM,
            lease: LeaseTiming::default(),
        }
    }
}

/// A published, verified base image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseImage {
    /// The volume name (`base-<entry>.<key>.<fmt>`).
    pub name: String,
    /// Its path on the host (what an overlay's backing store names).
    pub path: String,
    /// Its disk format.
    pub format: ImageFormat,
    /// Its size in bytes.
    pub size: u64,
}

/// What the single-flight job needs, owned (the job outlives any one
/// caller).
struct Shared {
    entry: Identifier,
    hosts: Arc<HostTable>,
    source: ImageSource,
    options: CacheOptions,
}

/// The base images of one provider entry on all its hosts: one verified
/// base volume per (host, image key), downloaded once by a fill that is a
/// task of the cache's (fenced across processes by a fill lease) and
/// shared by every VM's overlay. [`ensure_by`](Self::ensure_by) says what a
/// caller gets.
///
/// Dropping the cache aborts its fills.
pub struct ImageCache {
    shared: Arc<Shared>,
    flights: SingleFlight<(Identifier, Identifier), SharedResult<BaseImage, ApiError>>,
}

impl ImageCache {
    /// A cache for provider entry `entry`, reaching hosts through `hosts`
    /// and downloading with `source`. Does no I/O.
    pub(crate) fn new(
        entry: Identifier,
        hosts: Arc<HostTable>,
        source: ImageSource,
        options: CacheOptions,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                entry,
                hosts,
                source,
                options,
            }),
            flights: SingleFlight::new(),
        }
    }

    /// The bound on removing a failed operation's volumes.
    pub fn cleanup_budget(&self) -> Duration {
        self.shared.options.cleanup_budget
    }

    /// Fills in progress, by (host, key).
    pub fn in_flight(&self) -> usize {
        self.flights.in_flight()
    }

    /// As [`ensure_by`](Self::ensure_by) with no deadline of the caller's
    /// (the job's own budgets still bound it).
    ///
    /// # Errors
    /// As [`ensure_by`](Self::ensure_by).
    ///
    /// # Cancel safety
    /// As [`ensure_by`](Self::ensure_by).
    pub async fn ensure(
        &self,
        host: &Kvm2Host,
        key: &Identifier,
        image: &Kvm2Image,
    ) -> Result<BaseImage, ApiError> {
        self.ensure_by(host, key, image, None).await
    }

    /// The base of image `key` (configured as `image`) on `host`,
    /// downloading and publishing it first when the host has none, or
    /// waiting for the fill another caller (or process) runs. Waits until
    /// `deadline` at most.
    ///
    /// # Errors
    /// Permanent when the image is the sample config's placeholder (an
    /// all-zero sha256: nothing is downloaded), when the configured image
    /// was edited after its base was made (add a new key instead), the
    /// download's digest does not match, the image is over the size cap or
    /// the server refuses it (4xx), or a
    /// base without a valid marker is in use (kept); QuotaExceeded when the
    /// pool lacks the space; Transient for network, libvirt and budget
    /// failures, and when `deadline` passes first (the fill goes on; a
    /// later call joins it). A failed fill leaves no base and no lease
    /// behind (clean-up permitting: a host that vanished keeps them until
    /// the lease is provably abandoned and swept).
    ///
    /// # Cancel safety
    /// Cancel safe: the fill is a task of the cache's, not the caller's;
    /// dropping this future only stops waiting.
    pub async fn ensure_by(
        &self,
        host: &Kvm2Host,
        key: &Identifier,
        image: &Kvm2Image,
        deadline: Option<Instant>,
    ) -> Result<BaseImage, ApiError> {
        refuse_placeholder(key, image)?;
        let shared = self.shared.clone();
        let (host_name, pool, key_owned, image_owned) = (
            host.name.clone(),
            host.pool.clone(),
            key.clone(),
            image.clone(),
        );
        let outcome = self
            .flights
            .run(
                (host.name.clone(), key.clone()),
                deadline,
                move || async move {
                    ensure_job(&shared, &host_name, &pool, &key_owned, &image_owned)
                        .await
                        .map_err(Arc::new)
                },
            )
            .await;
        match outcome {
            Ok(Ok(base)) => Ok(base),
            Ok(Err(e)) => Err(ApiError::wrap(
                e.class(),
                format!("base image {key} on host {}: {}", host.name, e.message()),
                e,
            )),
            Err(Left::DeadlineReached) => Err(ApiError::transient(format!(
                "base image {key} on host {}: still being filled when the caller's deadline came; \
                 the fill goes on and a retry joins it",
                host.name
            ))),
            Err(Left::JobLost) => Err(ApiError::transient(format!(
                "base image {key} on host {}: the fill ended without a result",
                host.name
            ))),
        }
    }
}

/// Refuses an image whose sha256 is the placeholder (all zeros, as in
/// `deploy/providers-config.yaml` until the guest image is built): no
/// download is tried, the answer names what to do.
///
/// # Errors
/// Permanent when `image` carries the placeholder digest.
pub fn refuse_placeholder(key: &Identifier, image: &Kvm2Image) -> Result<(), ApiError> {
    if image.sha256.to_string().bytes().all(|b| b == b'0') {
        return Err(ApiError::permanent(format!(
            "image {key} is a placeholder (sha256 all zeros): build the proxy guest image with \
             `cargo xtask guest-image`, serve it over HTTP(S), and put its URL and sha256 into \
             the providers config"
        )));
    }
    Ok(())
}

/// What the pool holds for one base.
struct Seen {
    base: Option<libvirt_rpc::StorageVol>,
    marker: Option<Vec<u8>>,
    lease: Option<Vec<u8>>,
}

async fn look(ops: &PoolOps<'_>, names: &BaseNames) -> Result<Seen, ApiError> {
    let small = |name: String, limit: usize| async move {
        Ok::<_, ApiError>(match ops.find(&name).await? {
            // Too large to be what it should: reads as unreadable.
            Some(vol) => Some(ops.read_small(&vol, limit).await?.unwrap_or_default()),
            None => None,
        })
    };
    Ok(Seen {
        base: ops.find(&names.base()).await?,
        marker: small(names.marker(), MAX_MARKER_LEN).await?,
        lease: small(names.fill_lease(), MAX_LEASE_LEN).await?,
    })
}

async fn ensure_job(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
) -> Result<BaseImage, ApiError> {
    let names = BaseNames::new(&shared.entry, key, image.format);
    let timing = shared.options.lease;
    let budget = shared.options.fill_budget;
    // Waiting on another process's fill: its budget, then until its lease
    // is provably abandoned, then ours.
    let give_up = Instant::now() + budget + timing.stale_after + budget;
    let wanted = WantedImage::from(image);
    let mut watch = LeaseWatch::default();
    loop {
        let conn = shared.hosts.shared(host).await?;
        let ops = PoolOps::open(host, conn.client(), pool).await?;
        let seen = look(&ops, &names).await?;
        let state = judge(key, &wanted, seen.base.is_some(), seen.marker.as_deref())
            .map_err(ApiError::from)?;
        if let BaseState::Ready(marker) = state {
            return ready(&ops, seen.base, &marker).await;
        }
        if let Some(bytes) = seen.lease {
            // Another fill (or the wreck of one) holds the base.
            if watch.abandoned(&bytes, timing.stale_after, |lease| {
                tracing::info!(%host, %pool, lease = %names.fill_lease(),
                    heartbeat_age_s = lease.heartbeat_age(SystemTime::now()),
                    stale_after_s = timing.stale_after.as_secs(),
                    "waiting for another fill of this image (its lease is swept once its heartbeat is stale)");
            }) {
                sweep(&ops, &names, &bytes).await?;
                continue;
            }
            if Instant::now() >= give_up {
                return Err(ApiError::transient(format!(
                    "another fill has held {} for longer than two fill budgets",
                    names.fill_lease()
                )));
            }
            drop(ops);
            drop(conn);
            tokio::time::sleep(timing.poll).await;
            continue;
        }
        let Some((lease, leased_at)) = take_lease(&ops, &names).await? else {
            continue;
        };
        if let Some(base) = look_under_lease(&ops, &names, key, &wanted, &lease).await? {
            return Ok(base);
        }
        drop(ops);
        return cold_fill(shared, host, pool, key, image, &names, lease, leased_at).await;
    }
}

/// What a waiter has seen of another process's fill lease.
#[derive(Default)]
struct LeaseWatch {
    /// Unparsable lease bytes and when they were first seen: they age out
    /// after the staleness window unchanged.
    unreadable_since: Option<(Vec<u8>, Instant)>,
    waiting_logged: bool,
}

impl LeaseWatch {
    /// Whether the lease `bytes` is provably abandoned: its heartbeat older
    /// than `stale_after`, or unreadable and unchanged for that long.
    /// `log_wait` runs once, the first time a readable lease is waited for.
    fn abandoned(
        &mut self,
        bytes: &[u8],
        stale_after: Duration,
        log_wait: impl FnOnce(&Lease),
    ) -> bool {
        match Lease::parse(bytes) {
            Some(lease) => {
                self.unreadable_since = None;
                if !self.waiting_logged {
                    self.waiting_logged = true;
                    log_wait(&lease);
                }
                lease.abandoned(SystemTime::now(), stale_after)
            }
            None => {
                let since = match &self.unreadable_since {
                    Some((seen, at)) if seen.as_slice() == bytes => *at,
                    _ => {
                        let now = Instant::now();
                        self.unreadable_since = Some((bytes.to_vec(), now));
                        now
                    }
                };
                since.elapsed() > stale_after
            }
        }
    }
}

/// Takes the fill lease (libvirtd creates a name once): `None` when another
/// process took it first. The fence counts from the returned instant, taken
/// before the heartbeat time is.
async fn take_lease(
    ops: &PoolOps<'_>,
    names: &BaseNames,
) -> Result<Option<(Lease, std::time::Instant)>, ApiError> {
    let leased_at = std::time::Instant::now();
    let lease = Lease::new(nonce(), SystemTime::now());
    if let Err(e) = ops.write_small(&names.fill_lease(), &lease.render()).await {
        if ops.find(&names.fill_lease()).await?.is_some() {
            // Another process took it first (or our write half-failed: then
            // it is ours and unreadable, and ages out).
            tracing::debug!(host = %ops.host, pool = %ops.pool.name, error = %chain(&e), "fill lease taken meanwhile");
            return Ok(None);
        }
        return Err(e);
    }
    tracing::debug!(host = %ops.host, pool = %ops.pool.name, lease = %names.fill_lease(), "fill lease taken");
    Ok(Some((lease, leased_at)))
}

/// Holding the lease, looks again (a fill may have ended between the first
/// look and the lease): the base when it is ready (lease released), `None`
/// when the caller is to fill (debris removed). On error the lease is
/// released.
async fn look_under_lease(
    ops: &PoolOps<'_>,
    names: &BaseNames,
    key: &Identifier,
    wanted: &WantedImage,
    lease: &Lease,
) -> Result<Option<BaseImage>, ApiError> {
    let state = look(ops, names).await.and_then(|seen| {
        let state = judge(key, wanted, seen.base.is_some(), seen.marker.as_deref())
            .map_err(ApiError::from)?;
        Ok((seen, state))
    });
    let (seen, state) = match state {
        Ok(seen_state) => seen_state,
        Err(e) => {
            release(ops, names, lease).await;
            return Err(e);
        }
    };
    match state {
        BaseState::Ready(marker) => {
            release(ops, names, lease).await;
            ready(ops, seen.base, &marker).await.map(Some)
        }
        BaseState::Debris(reason) => {
            tracing::warn!(host = %ops.host, pool = %ops.pool.name, base = %names.base(), %reason, "image cache debris");
            match remove_unused_base(ops, names, seen.base.as_ref()).await {
                Ok(()) => Ok(None),
                Err(e) => {
                    release(ops, names, lease).await;
                    Err(e)
                }
            }
        }
        BaseState::Absent => Ok(None),
    }
}

async fn ready(
    ops: &PoolOps<'_>,
    base: Option<libvirt_rpc::StorageVol>,
    marker: &ImageMarker,
) -> Result<BaseImage, ApiError> {
    // judge saw the base, so it exists.
    let Some(base) = base else {
        return Err(ApiError::transient("base volume vanished"));
    };
    let path = ops.path(&base).await?;
    Ok(BaseImage {
        name: base.name,
        path,
        format: marker.format,
        size: marker.size,
    })
}

/// Deletes an unpublished base (marker first, then the base) unless a
/// volume or domain uses its file: then it is kept and the answer is
/// Permanent, naming the users.
async fn remove_unused_base(
    ops: &PoolOps<'_>,
    names: &BaseNames,
    base: Option<&libvirt_rpc::StorageVol>,
) -> Result<(), ApiError> {
    if let Some(base) = base {
        let path = ops.path(base).await?;
        let users = users_of(ops.host, ops.client, &ops.pool, &path).await?;
        if !users.is_empty() {
            tracing::error!(host = %ops.host, base = %names.base(), %users,
                "base image has no valid marker but is in use; kept");
            return Err(ApiError::permanent(format!(
                "base volume {} has no valid marker but is in use by {users}; it is kept. \
                 Restore its marker, or add a new image key and move the instances to it",
                names.base()
            )));
        }
    }
    // Marker first: a marker must never outlive its base.
    ops.remove(&names.marker()).await?;
    ops.remove(&names.base()).await?;
    Ok(())
}

/// Sweeps a provably abandoned fill: its unpublished base (if unused),
/// then its lease — only if the lease still reads `judged` (another
/// process may have swept it and started afresh meanwhile).
async fn sweep(ops: &PoolOps<'_>, names: &BaseNames, judged: &[u8]) -> Result<(), ApiError> {
    let Some(vol) = ops.find(&names.fill_lease()).await? else {
        return Ok(());
    };
    if ops
        .read_small(&vol, MAX_LEASE_LEN)
        .await?
        .unwrap_or_default()
        != judged
    {
        return Ok(());
    }
    tracing::warn!(host = %ops.host, pool = %ops.pool.name, lease = %names.fill_lease(),
        "sweeping an abandoned image fill");
    let base = ops.find(&names.base()).await?;
    let marked = ops.find(&names.marker()).await?.is_some();
    if !marked {
        remove_unused_base(ops, names, base.as_ref()).await?;
    }
    ops.remove(&names.fill_lease()).await?;
    Ok(())
}

/// Deletes `lease` if the pool's lease is still it; failures are logged
/// (an unbeating lease ages out and is swept).
async fn release(ops: &PoolOps<'_>, names: &BaseNames, lease: &Lease) {
    let work = async {
        if still_ours(ops, names, lease).await? {
            ops.remove(&names.fill_lease()).await?;
        }
        Ok::<_, ApiError>(())
    };
    if let Err(e) = work.await {
        tracing::warn!(host = %ops.host, lease = %names.fill_lease(), error = %chain(&e),
            "could not release a fill lease; it ages out");
    }
}

/// True when the pool's lease names `lease`'s holder.
async fn still_ours(ops: &PoolOps<'_>, names: &BaseNames, lease: &Lease) -> Result<bool, ApiError> {
    let Some(vol) = ops.find(&names.fill_lease()).await? else {
        return Ok(false);
    };
    Ok(ops
        .read_small(&vol, MAX_LEASE_LEN)
        .await?
        .and_then(|b| Lease::parse(&b))
        .is_some_and(|l| l.holder == lease.holder))
}

/// The unpublished base a fill made, for clean-up on failure.
#[derive(Default)]
struct FillDebris {
    unmarked_base: bool,
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
async fn cold_fill(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
    names: &BaseNames,
    lease: Lease,
    leased_at: std::time::Instant,
) -> Result<BaseImage, ApiError> {
    let budget = shared.options.fill_budget;
    let mut debris = FillDebris::default();
    let conn = match shared.hosts.dedicated(host).await {
        Ok(conn) => conn,
        Err(e) => {
            cleanup(shared, host, pool, names, &lease, &debris).await;
            return Err(e);
        }
    };
    let fence = Arc::new(Fence::new(leased_at, shared.options.lease.fence_after()));
    let filling = fill(
        shared,
        &conn,
        pool,
        key,
        image,
        names,
        &lease,
        &fence,
        &mut debris,
    );
    let beating = heartbeat(shared, host, pool, names, lease, &fence);
    let outcome = tokio::time::timeout(budget, async {
        tokio::pin!(filling);
        tokio::select! {
            out = &mut filling => out,
            fenced = beating => {
                tracing::warn!(%host, %pool, lease = %names.fill_lease(), reason = %fenced,
                    "image fill fenced: it stops writing");
                Err(ApiError::from(crate::Error::FillFenced(fenced)))
            }
        }
    })
    .await
    .unwrap_or_else(|_| {
        Err(ApiError::transient(format!(
            "filling the cache took longer than its budget of {budget:?}"
        )))
    });
    // SSH first, never blocking: a frozen link cannot hold this up.
    conn.close().await;
    if outcome.is_err() {
        cleanup(shared, host, pool, names, &lease, &debris).await;
    }
    outcome
}

/// Removes a failed fill's unpublished base and its lease, on the shared
/// connection, within the clean-up budget. The base is this fill's own,
/// created under its lease and never marked, so nothing can use it: it is
/// deleted without the users check.
async fn cleanup(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    names: &BaseNames,
    lease: &Lease,
    debris: &FillDebris,
) {
    let work = async {
        let conn = shared.hosts.shared(host).await?;
        let ops = PoolOps::open(host, conn.client(), pool).await?;
        if still_ours(&ops, names, lease).await? {
            if debris.unmarked_base && ops.find(&names.marker()).await?.is_none() {
                ops.remove(&names.base()).await?;
            }
            ops.remove(&names.fill_lease()).await?;
        }
        Ok::<_, ApiError>(())
    };
    match tokio::time::timeout(shared.options.cleanup_budget, work).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(%host, %pool, error = %chain(&e), "could not remove a failed fill's volumes; its lease ages out and is swept");
        }
        Err(_) => {
            tracing::warn!(%host, %pool, "removing a failed fill's volumes timed out; its lease ages out and is swept");
        }
    }
}

/// Rewrites the lease's heartbeat every period, on the shared connection,
/// for as long as it is polled (the fill's future ends it), after reading
/// it back as ours; each confirmed beat re-opens `fence`. Returns — ending
/// the fill — when the lease is found gone or taken, or when the fence
/// closes because beats failed (each failure is logged) for longer than
/// it allows.
async fn heartbeat(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    names: &BaseNames,
    lease: Lease,
    fence: &Fence,
) -> Fenced {
    let timing = shared.options.lease;
    loop {
        tokio::time::sleep(timing.heartbeat).await;
        if let Err(fenced) = fence.check(std::time::Instant::now()) {
            return fenced;
        }
        let at = std::time::Instant::now();
        let beat = lease.beat(SystemTime::now());
        // Each beat within the fence: a beat that hangs cannot keep the
        // fill writing past it (the fill's reads check the fence too).
        let work = tokio::time::timeout(timing.fence_after(), async {
            let conn = shared.hosts.shared(host).await?;
            let ops = PoolOps::open(host, conn.client(), pool).await?;
            let Some(vol) = ops.find(&names.fill_lease()).await? else {
                return Ok(false);
            };
            let ours = ops
                .read_small(&vol, MAX_LEASE_LEN)
                .await?
                .and_then(|b| Lease::parse(&b))
                .is_some_and(|l| l.holder == lease.holder);
            if ours {
                ops.overwrite_small(&vol, &beat.render()).await?;
            }
            Ok::<_, ApiError>(ours)
        });
        match work.await {
            Ok(Ok(true)) => fence.confirm(at),
            Ok(Ok(false)) => {
                fence.lose();
                return Fenced::Lost;
            }
            Ok(Err(e)) => {
                tracing::warn!(%host, %pool, lease = %names.fill_lease(), error = %chain(&e), "fill heartbeat failed");
            }
            Err(_) => {
                tracing::warn!(%host, %pool, lease = %names.fill_lease(), "fill heartbeat timed out");
            }
        }
    }
}

#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename them
async fn fill(
    shared: &Shared,
    conn: &Connection,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
    names: &BaseNames,
    lease: &Lease,
    fence: &Arc<Fence>,
    debris: &mut FillDebris,
) -> Result<BaseImage, ApiError> {
    let host = conn.host();
    // The upload's finish answers only when the daemon has flushed
    // gigabytes: on this dedicated connection a call may take as long as
    // the whole fill may.
    let client = conn.client().with_call_timeout(shared.options.fill_budget);
    let ops = PoolOps::open(host, &client, pool).await?;
    let steps = FillSteps {
        ops: &ops,
        client: &client,
        pool,
        names,
        image,
        fence,
    };
    tracing::info!(%host, %pool, image = %key, "downloading base image");
    let download = steps
        .open_download(&shared.source, shared.options.headroom)
        .await?;
    let (base, sent) = steps.upload(download, debris).await?;
    let published = steps.publish(lease, base, sent, debris).await?;
    tracing::info!(%host, %pool, image = %key, bytes = sent, "base image published");
    Ok(published)
}

/// One fill's phases, in order: open the download (room checked), upload
/// it into a new base (verified), publish the base.
struct FillSteps<'a> {
    ops: &'a PoolOps<'a>,
    client: &'a libvirt_rpc::Client,
    /// The pool's name in the config.
    pool: &'a Identifier,
    names: &'a BaseNames,
    image: &'a Kvm2Image,
    fence: &'a Arc<Fence>,
}

impl FillSteps<'_> {
    /// Opens the download and checks the pool has room for it.
    async fn open_download(
        &self,
        source: &ImageSource,
        headroom: u64,
    ) -> Result<Download, ApiError> {
        let download = source
            .open(&self.image.url, self.image.sha256)
            .await
            .map_err(ApiError::from)?;
        // The declared length, or the cap when the server declared none:
        // the image is written once, into the base itself.
        let needed = download.declared_len().unwrap_or(source.limits().max_bytes);
        check_pool_space(
            self.ops.host,
            self.pool,
            self.ops.available().await?,
            needed,
            headroom,
        )?;
        Ok(download)
    }

    /// Streams the download into a new, empty base volume and verifies it:
    /// the digest computed while streaming, the size the host stored. The
    /// base and the bytes sent.
    async fn upload(
        &self,
        download: Download,
        debris: &mut FillDebris,
    ) -> Result<(libvirt_rpc::StorageVol, u64), ApiError> {
        let (ops, host) = (self.ops, self.ops.host);
        // Created empty, so that its length afterwards is what the daemon
        // wrote: a `dir` pool sizes a new file to its capacity at once,
        // which would make the length check below pass whatever arrived.
        // libvirt probes the uploaded bytes (a qcow2 image reads as qcow2
        // with its virtual size).
        let base_xml = raw_volume(&self.names.base(), 0).map_err(ApiError::from)?;
        let base = ops.create(&self.names.base(), &base_xml).await?;
        debris.unmarked_base = true;
        let mut reader = FencedRead::new(download.into_async_read(), self.fence.clone());
        let sent = observed(
            host,
            proc_num::STORAGE_VOL_UPLOAD,
            self.client.storage_vol_upload(
                &base,
                0,
                0,
                libvirt_rpc::StorageVolStreamFlags::empty(),
                &mut reader,
            ),
        )
        .await
        .map_err(|e| upload_error(host, e))?;
        let download = reader.into_inner().into_inner().into_inner();
        if download.verified() != Some(self.image.sha256) {
            return Err(ApiError::transient(
                "the download ended without a verified digest",
            ));
        }
        let stored = ops.physical(&base).await?;
        if stored != sent {
            return Err(ApiError::transient(format!(
                "uploaded {sent} bytes but the volume holds {stored}"
            )));
        }
        Ok((base, sent))
    }

    /// Publishes the verified base: fenced (a fill whose lease was swept,
    /// or whose heartbeat went unconfirmed past the fence, never
    /// publishes), then the marker (the commit point), then the lease goes.
    async fn publish(
        &self,
        lease: &Lease,
        base: libvirt_rpc::StorageVol,
        sent: u64,
        debris: &mut FillDebris,
    ) -> Result<BaseImage, ApiError> {
        let (ops, names) = (self.ops, self.names);
        self.fence
            .check(std::time::Instant::now())
            .map_err(|f| ApiError::from(crate::Error::FillFenced(f)))?;
        if !still_ours(ops, names, lease).await? {
            return Err(ApiError::transient(
                "the fill lease was lost before publishing; nothing published",
            ));
        }
        let marker = ImageMarker {
            sha256: self.image.sha256,
            url: self.image.url.clone(),
            format: self.image.format,
            size: sent,
        };
        ops.write_small(&names.marker(), &marker.render()).await?;
        debris.unmarked_base = false;
        let path = ops.path(&base).await?;
        if let Err(e) = ops.remove(&names.fill_lease()).await {
            tracing::warn!(host = %ops.host, pool = %ops.pool.name, error = %chain(&e), "could not remove the fill lease after publishing; harmless (the marker decides)");
        }
        Ok(BaseImage {
            name: base.name,
            path,
            format: self.image.format,
            size: sent,
        })
    }
}

/// An upload failure: the source's own error (digest, cap, cut-off body)
/// when the stream was aborted because of it, else libvirt's.
fn upload_error(host: &Identifier, e: libvirt_rpc::Error) -> ApiError {
    if let libvirt_rpc::Error::Source(io) = &e
        && let Some(source) = io.get_ref().and_then(|s| s.downcast_ref::<crate::Error>())
    {
        // The source's own error is the story; libvirt's "stream aborted"
        // wrapper adds nothing, so it is not kept as a source (the chain
        // says each thing once).
        let class = source.class();
        let text = chain(source);
        if let crate::Error::FillFenced(_) = source {
            return ApiError::new(class, format!("host {host}: {text}"));
        }
        return ApiError::new(class, format!("image download failed: {text}"));
    }
    let class = errors::classify(&e);
    // An aborted upload is never a missing object.
    let class = if class == ErrorClass::NotFound {
        ErrorClass::Transient
    } else {
        class
    };
    ApiError::wrap(class, format!("host {host}: image upload failed"), e)
}

/// A random 64-bit nonce for lease holders (std's per-process random
/// hasher keys, mixed with the clock and the process id).
fn nonce() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

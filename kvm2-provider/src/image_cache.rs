//! The base image cache: one verified base volume per (provider entry,
//! host, image key), downloaded once and shared by every VM's overlay.
//!
//! ```text
//! ensure(host, key) ──single flight per (host, key)──▶ read base + marker (shared connection)
//!   marker valid, matches config ─────────────────────▶ Ready: use the base
//!   marker records another URL/sha256/format ─────────▶ Permanent "add a new key" (base kept)
//!   debris (base w/o marker, marker w/o base, bad) ───▶ delete it, then fill
//!   nothing ──────────────────────────────────────────▶ fill (dedicated connection, budget):
//!       GET headers ─▶ free space ≥ size + headroom? else QuotaExceeded
//!       create tmp-<entry>.<key>.<nonce>.<fmt> ─▶ stream body into it (sha256 while streaming)
//!       verify digest and size ─▶ CreateXMLFrom(tmp → base-<entry>.<key>.<fmt>) ─▶ delete tmp
//!       write the marker (digest, URL, format, size)  ◀── the commit point, last
//! ```
//!
//! **Atomic publish.** libvirt cannot rename a volume, so the verified
//! upload is cloned into the base name by the daemon
//! (`virStorageVolCreateXMLFrom`, a copy on the host: no second download;
//! raw images are copied byte for byte, qcow2 ones re-encoded by
//! `qemu-img convert` with the same guest-visible contents) and the marker
//! is written after that. A base without a valid marker is
//! never used — whatever interrupted the publish, the next `ensure` finds
//! debris and deletes it. The cost is one local copy of the image per cold
//! fill.
//!
//! **Failures.** A source failure mid-way makes the stream's last read fail,
//! so libvirt-rpc aborts the volume stream instead of finishing it; the
//! temporary volume is deleted and nothing is published. A budget overrun
//! closes the dedicated connection (SSH first: a frozen link cannot hold
//! it). Clean-up runs on the shared connection within its own bound.
//!
//! **Concurrency.** Callers needing the same (host, key) share one job
//! ([`SingleFlight`]): five cold Creates start one download. The job runs in
//! the callers' futures (no task is spawned); if every caller is dropped
//! the job is dropped with them (its dedicated connection closes, its
//! upload is aborted) and the next caller starts afresh. Within one process no two
//! fills of a key run at once, so any temporary volume of that key found
//! when a fill starts is debris and is deleted.
//!
//! **Edits.** A valid marker whose digest, URL or format differs from the
//! config is a Permanent error telling the operator to add a new key: the
//! base is kept because overlays of running VMs are backed by it.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use provider_api::config::{ImageFormat, Kvm2Host, Kvm2Image};
use provider_api::{Error as ApiError, ErrorClass, Identifier};

use crate::connection::Connection;
use crate::host_table::HostTable;
use crate::image_marker::{BaseState, ImageMarker, MAX_MARKER_LEN, WantedImage, judge};
use crate::image_source::ImageSource;
use crate::libvirt_errors::to_provider_error;
use crate::observe::observed;
use crate::pool_space::check_pool_space;
use crate::single_flight::{SharedResult, SingleFlight};
use crate::volume_names::BaseNames;
use crate::volume_xml::{base_volume, raw_volume};
use crate::volumes::PoolOps;

/// Budgets of the image cache.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CacheOptions {
    /// Bound on one cold fill: download, upload, verify, publish, marker
    /// (default 45 minutes; the download has its own deadline too).
    pub fill_budget: Duration,
    /// Bound on removing a failed fill's temporary volume (default 30 s).
    pub cleanup_budget: Duration,
    /// Space left free in the pool beyond the image (default 1 GiB).
    pub headroom: u64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            fill_budget: Duration::from_secs(45 * 60),
            cleanup_budget: Duration::from_secs(30),
            headroom: crate::pool_space::DEFAULT_HEADROOM,
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

/// The base images of one provider entry on all its hosts; see the
/// [module docs](self).
pub struct ImageCache {
    shared: Arc<Shared>,
    flights: SingleFlight<(Identifier, Identifier), SharedResult<BaseImage, ApiError>>,
}

impl ImageCache {
    /// A cache for provider entry `entry`, reaching hosts through `hosts`
    /// and downloading with `source`. Does no I/O.
    pub fn new(
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

    /// The base of image `key` (configured as `image`) on `host`,
    /// downloading and publishing it first when the host has none.
    ///
    /// # Errors
    /// Permanent when the configured image was edited after its base was
    /// made (add a new key instead), the download's digest does not match,
    /// the image is over the size cap or the server refuses it (4xx);
    /// QuotaExceeded when the pool lacks the space; Transient for network,
    /// libvirt and budget failures. Every failure leaves no base and no
    /// temporary volume behind (clean-up permitting: a host that vanished
    /// keeps its temporary volume until the next fill deletes it).
    ///
    /// # Cancel safety
    /// Cancel safe: the fill belongs to every caller waiting on it and
    /// continues while one of them is polled; if all are dropped it is
    /// dropped too (nothing of it outlives its callers), and its temporary
    /// volume is swept by the next fill of the same (host, key).
    pub async fn ensure(
        &self,
        host: &Kvm2Host,
        key: &Identifier,
        image: &Kvm2Image,
    ) -> Result<BaseImage, ApiError> {
        let shared = self.shared.clone();
        let (host_name, pool, key_owned, image_owned) = (
            host.name.clone(),
            host.pool.clone(),
            key.clone(),
            image.clone(),
        );
        self.flights
            .run((host.name.clone(), key.clone()), move || async move {
                ensure_job(&shared, &host_name, &pool, &key_owned, &image_owned)
                    .await
                    .map_err(Arc::new)
            })
            .await
            .map_err(|e| {
                ApiError::wrap(
                    e.class(),
                    format!("base image {key} on host {}: {}", host.name, e.message()),
                    e,
                )
            })
    }
}

async fn ensure_job(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
) -> Result<BaseImage, ApiError> {
    let names = BaseNames::new(&shared.entry, key, image.format);
    let conn = shared.hosts.shared(host).await?;
    let ops = PoolOps::open(host, conn.client(), pool).await?;
    let base = ops.find(&names.base()).await?;
    let marker = match ops.find(&names.marker()).await? {
        Some(vol) => Some(
            ops.read_small(&vol, MAX_MARKER_LEN)
                .await?
                // Too large to be a marker: reads as unreadable.
                .unwrap_or_default(),
        ),
        None => None,
    };
    match judge(
        key,
        &WantedImage::from(image),
        base.is_some(),
        marker.as_deref(),
    )
    .map_err(ApiError::from)?
    {
        BaseState::Ready(marker) => {
            // judge saw the base, so it exists.
            let Some(base) = base else {
                return Err(ApiError::transient("base volume vanished"));
            };
            let path = ops.path(&base).await?;
            return Ok(BaseImage {
                name: base.name,
                path,
                format: marker.format,
                size: marker.size,
            });
        }
        BaseState::Debris(reason) => {
            tracing::warn!(%host, %pool, base = %names.base(), %reason, "removing image cache debris");
            // Marker first: a marker must never outlive its base.
            ops.remove(&names.marker()).await?;
            ops.remove(&names.base()).await?;
        }
        BaseState::Absent => {}
    }
    // No other fill of this key runs in this process: old uploads are debris.
    for vol in list_volumes(&ops).await? {
        if names.is_upload(&vol) {
            tracing::warn!(%host, %pool, volume = %vol, "removing an abandoned image upload");
            ops.remove(&vol).await?;
        }
    }
    drop(ops);
    cold_fill(shared, host, pool, key, image, &names).await
}

async fn list_volumes(ops: &PoolOps<'_>) -> Result<Vec<String>, ApiError> {
    observed(
        ops.host,
        "storage_pool_list_all_volumes",
        ops.client.storage_pool_list_all_volumes(&ops.pool),
    )
    .await
    .map(|vols| vols.into_iter().map(|v| v.name).collect())
    .map_err(|e| to_provider_error(format!("host {}: list pool {}", ops.host, ops.pool.name), e))
}

/// Volumes a fill made that are not (yet) a published, marked base.
#[derive(Default)]
struct FillDebris {
    upload: Option<String>,
    unmarked_base: bool,
}

async fn cold_fill(
    shared: &Shared,
    host: &Identifier,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
    names: &BaseNames,
) -> Result<BaseImage, ApiError> {
    let conn = shared.hosts.dedicated(host).await?;
    let budget = shared.options.fill_budget;
    let mut debris = FillDebris::default();
    let outcome = tokio::time::timeout(
        budget,
        fill(shared, &conn, pool, key, image, names, &mut debris),
    )
    .await
    .unwrap_or_else(|_| {
        Err(ApiError::transient(format!(
            "filling the cache took longer than its budget of {budget:?}"
        )))
    });
    // SSH first, never blocking: a frozen link cannot hold this up.
    conn.close().await;
    if outcome.is_err() && (debris.upload.is_some() || debris.unmarked_base) {
        let cleanup = async {
            let conn = shared.hosts.shared(host).await?;
            let ops = PoolOps::open(host, conn.client(), pool).await?;
            if let Some(upload) = &debris.upload {
                ops.remove(upload).await?;
            }
            if debris.unmarked_base {
                ops.remove(&names.base()).await?;
            }
            Ok::<_, ApiError>(())
        };
        match tokio::time::timeout(shared.options.cleanup_budget, cleanup).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(%host, %pool, error = %e, "could not remove a failed fill's volumes; the next fill will");
            }
            Err(_) => {
                tracing::warn!(%host, %pool, "removing a failed fill's volumes timed out; the next fill will");
            }
        }
    }
    outcome
}

async fn fill(
    shared: &Shared,
    conn: &Connection,
    pool: &Identifier,
    key: &Identifier,
    image: &Kvm2Image,
    names: &BaseNames,
    debris: &mut FillDebris,
) -> Result<BaseImage, ApiError> {
    let host = conn.host();
    // The host-side copy (`CreateXMLFrom`) and the upload's finish answer
    // only when the daemon is done with gigabytes: on this dedicated
    // connection a call may take as long as the whole fill may.
    let client = conn.client().with_call_timeout(shared.options.fill_budget);
    let ops = PoolOps::open(host, &client, pool).await?;
    tracing::info!(%host, %pool, image = %key, "downloading base image");
    let download = shared
        .source
        .open(&image.url, image.sha256)
        .await
        .map_err(ApiError::from)?;
    // The declared length, or the cap when the server declared none, twice:
    // the upload and its published copy exist at once until the upload is
    // deleted. (A compressed qcow2 may still grow in the copy, which
    // qemu-img writes uncompressed.)
    let needed = download
        .declared_len()
        .unwrap_or(shared.source.limits().max_bytes)
        .saturating_mul(2);
    check_pool_space(
        host,
        pool,
        ops.available().await?,
        needed,
        shared.options.headroom,
    )?;

    let upload_name = names.upload(nonce());
    // Created empty, so that its length afterwards is what the daemon wrote:
    // a `dir` pool sizes a new file to its capacity at once, which would
    // make the length check below pass whatever arrived.
    let upload_xml = raw_volume(&upload_name, 0).map_err(ApiError::from)?;
    let upload = ops.create(&upload_name, &upload_xml).await?;
    debris.upload = Some(upload_name.clone());
    let mut reader = download.into_async_read();
    let sent = observed(
        host,
        "storage_vol_upload",
        client.storage_vol_upload(
            &upload,
            0,
            0,
            libvirt_rpc::StorageVolStreamFlags::empty(),
            &mut reader,
        ),
    )
    .await
    .map_err(|e| upload_error(host, e))?;
    let download = reader.into_inner().into_inner();

    // Verify: the digest was computed while streaming; the size on the host
    // must be what was sent.
    if download.verified() != Some(image.sha256) {
        return Err(ApiError::transient(
            "the download ended without a verified digest",
        ));
    }
    let stored = ops.physical(&upload).await?;
    if stored != sent {
        return Err(ApiError::transient(format!(
            "uploaded {sent} bytes but the volume holds {stored}"
        )));
    }

    // Publish: the daemon copies the verified upload into the base name.
    debris.unmarked_base = true;
    let base_xml = base_volume(&names.base(), sent, image.format).map_err(ApiError::from)?;
    let base = ops.clone_from(&names.base(), &base_xml, &upload).await?;
    // A raw copy is byte for byte; a qcow2 clone is re-encoded by qemu-img,
    // so only its presence can be checked.
    if image.format == ImageFormat::Raw {
        let base_size = ops.physical(&base).await?;
        if base_size != sent {
            return Err(ApiError::transient(format!(
                "published base holds {base_size} bytes, {sent} expected"
            )));
        }
    }
    ops.remove(&upload_name).await?;
    debris.upload = None;

    // The commit point, last.
    let marker = ImageMarker {
        sha256: image.sha256,
        url: image.url.clone(),
        format: image.format,
        size: sent,
    };
    ops.write_small(&names.marker(), &marker.render()).await?;
    debris.unmarked_base = false;
    let path = ops.path(&base).await?;
    tracing::info!(%host, %pool, image = %key, bytes = sent, "base image published");
    Ok(BaseImage {
        name: base.name,
        path,
        format: image.format,
        size: sent,
    })
}

/// An upload failure: the source's own error (digest, cap, cut-off body)
/// when the stream was aborted because of it, else libvirt's.
fn upload_error(host: &Identifier, e: libvirt_rpc::Error) -> ApiError {
    if let libvirt_rpc::Error::Source(io) = &e
        && let Some(source) = io.get_ref().and_then(|s| s.downcast_ref::<crate::Error>())
    {
        let class = source.class();
        let message = format!("image download failed: {source}");
        return ApiError::wrap(class, message, e);
    }
    let class = crate::libvirt_errors::classify(&e);
    // An aborted upload is never a missing object.
    let class = if class == ErrorClass::NotFound {
        ErrorClass::Transient
    } else {
        class
    };
    ApiError::wrap(class, format!("host {host}: image upload failed"), e)
}

/// A random 64-bit nonce for temporary names (std's per-process random
/// hasher keys, mixed with the clock).
fn nonce() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

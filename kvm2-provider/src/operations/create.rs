//! Create: one proxy VM for one owner, idempotently.
//!
//! ```text
//! request ─▶ machine type, image (config defaults) ─▶ host from placement
//!   domain <name> exists? ── ours ──▶ start it if shut off, return it
//!                         └─ foreign / no mark ──▶ Permanent, untouched
//!   base = image cache ─▶ overlay (qcow2 on the base) ─▶ seed ISO volume
//!   ─▶ domain XML (mark, file disks, bridge NIC) ─▶ define ─▶ start
//!   ─▶ watch briefly: crashed / shut off / paused ⇒ failure
//!   any failure ⇒ remove what this Create made (domain, overlay, seed),
//!                 never the base
//! ```
//!
//! The instance name is `name_from_uid(owner)`; volumes are named after it,
//! so a Create cancelled half-way leaves only volumes the next Create for
//! that owner replaces and Delete removes.
//!
//! Host choice ([`placement`](super::placement)): the candidates in
//! placement order, each dialled, searched for the instance and admitted
//! (its `max_instances`, vCPUs and memory less its `reserved_memory`); a
//! host down, full or at its limit sends the Create on to the next one.
//!
//! **Deadline.** The whole Create runs against one deadline: the
//! request's, or now + [`ProviderOptions::create_budget`](crate::ProviderOptions)
//! (10 min by default). Dials, the lookup, the wait for the base image (a
//! fill shared with others goes on when this Create leaves), the capacity
//! check, define, start and the start watch all end at it (Transient,
//! naming the stage); what this Create made is then undone within the
//! clean-up budget, which may run past the deadline.
//!
//! **Capacity.** vCPUs and memory at admission, before the image is
//! fetched to the host; the pool's free space (seed + overlay reserve)
//! before anything per-VM is made ([`capacity`](crate::hosts::capacity)):
//! short → QuotaExceeded naming what. A start that fails for want of
//! memory or disk is QuotaExceeded too. Each candidate is searched for an
//! existing instance only when its turn comes: a frozen host never stalls
//! Creates meant for others (invariant 1). Known limit: an instance
//! created on a fallback host is not found from a host ranked before it
//! once that host can take it again; the garbage collector removes the
//! duplicate.

use provider_api::error::chain;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use libvirt_rpc::{
    Client, DomainCreateFlags, DomainDefineFlags, NoFlags, RunningReason, StateReason,
};
use provider_api::config::Kvm2Host;
use provider_api::{
    CreateRequest, Error as ApiError, ErrorClass, Identifier, Instance, InstanceState, ProviderId,
    ProviderType,
};

use super::placement::{self, Refusals};
use super::provider::Inner;
use crate::definition::{
    BootFirmware, DomainSpec, MachineName, MemoryMib, OwnerMark, SeedSpec, Vcpus, disk_path,
    domain_xml, seed_iso, stored_tags, vendor_data,
};
use crate::hosts::Connection;
use crate::hosts::capacity::{self, start_failure_class};
use crate::libvirt::state::{DomainPhase, classify};
use crate::libvirt::{DomainOps, Ownership, observed, to_provider_error};
use crate::storage::volume_xml::overlay_volume;
use crate::storage::{PoolOps, VmVolumes};
use crate::timestamp::Timestamp;
use libvirt_rpc::proc_num;
use provider_api::config::values::AbsolutePath;

/// How often the start watch reads the domain's state.
const WATCH_INTERVAL: Duration = Duration::from_millis(250);

pub(crate) async fn create(inner: &Inner, req: &CreateRequest) -> Result<Instance, ApiError> {
    let deadline = req
        .deadline
        .map(Instant::from_std)
        .unwrap_or_else(|| Instant::now() + inner.options.create_budget);
    // The contract has no NotFound for Create: something vanishing under a
    // Create (a volume or domain removed concurrently) is worth a retry.
    create_once(inner, req, deadline)
        .await
        .map_err(not_found_is_transient)
}

/// `work`, ended at `deadline` (Transient, naming `stage`).
async fn by<T>(
    deadline: Instant,
    stage: &str,
    work: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    tokio::time::timeout_at(deadline, work)
        .await
        .unwrap_or_else(|_| Err(past_deadline(stage)))
}

fn past_deadline(stage: &str) -> ApiError {
    ApiError::transient(format!("the create's deadline passed while {stage}"))
}

fn not_found_is_transient(e: ApiError) -> ApiError {
    if e.is_not_found() {
        let message = format!("{} (it vanished during the create)", e.message());
        e.restate(ErrorClass::Transient, message)
    } else {
        e
    }
}

async fn create_once(
    inner: &Inner,
    req: &CreateRequest,
    deadline: Instant,
) -> Result<Instance, ApiError> {
    let name = req.instance_name();
    // Two Creates for one owner at once would replace each other's volumes:
    // the second is turned away (Transient) while the first runs.
    let _running = inner.creating.try_claim(&name).ok_or_else(|| {
        ApiError::transient(format!(
            "a create for instance {name} is already running in this provider; retry when it ends"
        ))
    })?;
    let (_, machine) = inner.config.machine_type_for(req.machine_type.as_ref())?;
    let (key, image) = inner.config.image_for(req.image.as_ref())?;
    crate::images::refuse_placeholder(key, image)?;
    // Refused before anything is made (the mark is written at define).
    stored_tags(&req.tags)?;
    let wanted = Wanted {
        name: &name,
        machine,
        key,
        image,
    };
    let mut refusals = Refusals::default();
    for host in placement::candidates(inner, &req.placement, &req.owner_uid, &req.avoid)? {
        let conn = match dial(inner, host, deadline).await {
            Ok(conn) => conn,
            Err(e) => {
                refusals.push(&host.name, e);
                if Instant::now() >= deadline {
                    break;
                }
                continue;
            }
        };
        match create_on(inner, req, &wanted, host, &conn, deadline).await {
            // Full (or at its max_instances): the next candidate may have room.
            Err(e) if e.class() == ErrorClass::QuotaExceeded => {
                tracing::debug!(host = %host.name, error = %chain(&e), "host full for create");
                refusals.push(&host.name, e);
            }
            done => return done,
        }
    }
    Err(refusals.into_error())
}

/// What a Create makes, resolved from the request and the config.
struct Wanted<'a> {
    name: &'a Identifier,
    machine: &'a provider_api::config::MachineType,
    key: &'a Identifier,
    image: &'a provider_api::config::Kvm2Image,
}

/// The shared connection to `host`, within the deadline; a failure starts
/// the host's dial cool-down.
async fn dial(
    inner: &Inner,
    host: &Kvm2Host,
    deadline: Instant,
) -> Result<Arc<Connection>, ApiError> {
    match tokio::time::timeout_at(deadline, inner.hosts.shared(&host.name)).await {
        Ok(Ok(conn)) => {
            inner.dial_failures.dialled(&host.name);
            Ok(conn)
        }
        Ok(Err(e)) => {
            tracing::debug!(host = %host.name, error = %chain(&e), "host unusable for create");
            inner.dial_failures.failed(&host.name);
            Err(e)
        }
        Err(_) => {
            inner.dial_failures.failed(&host.name);
            Err(past_deadline(&format!("dialling host {}", host.name)))
        }
    }
}

/// The Create on one dialled host: the existing instance, or admission,
/// the base image and a new domain.
async fn create_on(
    inner: &Inner,
    req: &CreateRequest,
    wanted: &Wanted<'_>,
    host: &Kvm2Host,
    conn: &Connection,
    deadline: Instant,
) -> Result<Instance, ApiError> {
    let name = wanted.name;
    let client = conn.client();
    let id = ProviderId::new(
        ProviderType::Kvm2,
        inner.name.clone(),
        host.name.clone(),
        name.clone(),
    );

    let domains = DomainOps::new(conn);
    let lookup = domains.find_ours(name, &inner.name);
    match by(deadline, "looking the domain up", lookup).await? {
        Ownership::Absent => {}
        Ownership::Ours { domain, mark } if mark.owner_uid() == &req.owner_uid => {
            return by(
                deadline,
                "starting the existing domain",
                existing(inner, host, conn, domain, &mark, id),
            )
            .await;
        }
        Ownership::Ours { domain, .. } | Ownership::Foreign { domain, .. } => {
            return Err(ApiError::permanent(format!(
                "host {}: a domain named {} exists without this owner's mark; it is not adopted \
                 (remove or rename it, or delete the owning object)",
                host.name, domain.name
            )));
        }
    }

    let admission = placement::admit(inner, host, conn, wanted.machine);
    by(deadline, "checking the host's capacity", admission).await?;
    let base = inner
        .images
        .ensure_by(host, wanted.key, wanted.image, Some(deadline))
        .await?;
    let now = SystemTime::now();
    let mut made = Made::default();
    let outcome = tokio::time::timeout_at(
        deadline,
        Build {
            inner,
            host,
            client,
            name,
            req,
            machine: wanted.machine,
            base: &base,
            now,
        }
        .run(&mut made),
    )
    .await
    .unwrap_or_else(|_| Err(past_deadline("making and starting the domain")));
    match outcome {
        Ok(()) => Ok(Instance::new(
            id,
            InstanceState::Provisioning,
            None,
            Some(now),
        )),
        Err(e) => {
            undo(inner, host, name, &made).await;
            let message = format!("create {name} on host {}: {}", host.name, e.message());
            let class = e.class();
            Err(e.restate(class, message))
        }
    }
}

/// The instance names with a Create running, so a second Create for the
/// same owner is refused instead of racing the first.
#[derive(Default)]
pub(crate) struct Creating {
    names: Mutex<HashSet<Identifier>>,
}

impl Creating {
    /// Claims `name`; `None` when a Create holds it. The claim ends when
    /// the returned guard is dropped (also when the Create is cancelled).
    pub(crate) fn try_claim(&self, name: &Identifier) -> Option<Claim<'_>> {
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        names.insert(name.clone()).then(|| Claim {
            creating: self,
            name: name.clone(),
        })
    }
}

/// A claimed instance name; see [`Creating::try_claim`].
pub(crate) struct Claim<'a> {
    creating: &'a Creating,
    name: Identifier,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.creating
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.name);
    }
}

/// What this Create made, for undoing it.
#[derive(Default)]
struct Made {
    overlay: bool,
    seed: bool,
    domain: bool,
}

/// Everything one attempt at making and starting the domain needs.
struct Build<'a> {
    inner: &'a Inner,
    host: &'a Kvm2Host,
    client: &'a Client,
    name: &'a Identifier,
    req: &'a CreateRequest,
    machine: &'a provider_api::config::MachineType,
    base: &'a crate::images::BaseImage,
    now: SystemTime,
}

/// 12 random bytes: the salt of a password hash.
fn salt() -> Result<[u8; 12], ApiError> {
    use ring::rand::SecureRandom;
    let mut salt = [0u8; 12];
    ring::rand::SystemRandom::new()
        .fill(&mut salt)
        .map_err(|_| ApiError::transient("no random bytes for the password's salt"))?;
    Ok(salt)
}

/// The proxy's basic-auth credentials, read anew from the entry's
/// `proxy.credentials_file` (a rotated Secret reaches the next Create);
/// `None` without one. A file that cannot be read or parsed is Permanent:
/// the config or the Secret must change. No error shows the password.
async fn proxy_credentials(
    proxy: &provider_api::config::ProxySettings,
) -> Result<Option<provider_api::ProxyCredentials>, ApiError> {
    let Some(path) = &proxy.credentials_file else {
        return Ok(None);
    };
    let read = tokio::fs::read(path.as_path()).await;
    provider_api::ProxyCredentials::from_file(path, read).map(Some)
}

/// Where the per-VM volumes ended up on the host (parsed as libvirt
/// reports them: the domain XML takes only valid paths).
struct VolumePaths {
    overlay: AbsolutePath,
    seed: AbsolutePath,
}

impl Build<'_> {
    /// Makes the overlay, seed and domain, then starts and watches it;
    /// `made` records what exists for the undo.
    async fn run(&self, made: &mut Made) -> Result<(), ApiError> {
        let ops = PoolOps::open(&self.host.name, self.client, &self.host.pool).await?;
        let created_at = Timestamp::from_system_time(self.now)
            .ok_or_else(|| ApiError::permanent("the clock is before 1970"))?;
        self.check_disk(&ops).await?;
        let auth = match proxy_credentials(&self.inner.config.proxy).await? {
            Some(c) => Some(
                vendor_data::PasswordLine::new(&c, salt()?)
                    .map_err(|e| ApiError::permanent(e.to_string()))?,
            ),
            None => None,
        };
        let seed = self.seed(created_at, auth.as_ref())?;
        self.check_capacity(&ops, seed.len() as u64).await?;
        let paths = self.make_volumes(&ops, &seed, made).await?;
        let dom = self.define(created_at, paths).await?;
        made.domain = true;
        let h = &self.host.name;
        start(h, self.client, &dom).await?;
        watch_start(h, self.client, &dom, self.inner.options.start_watch).await
    }

    /// An overlay smaller than its image would cut the guest's disk short
    /// (a partition table running past the device's end): refused.
    async fn check_disk(&self, ops: &PoolOps<'_>) -> Result<(), ApiError> {
        let base = self.base;
        let base_vol = ops.find(&base.name).await?.ok_or_else(|| {
            ApiError::transient(format!(
                "host {}: base volume {} vanished",
                self.host.name, base.name
            ))
        })?;
        let image_size = ops.capacity(&base_vol).await?;
        let disk = self.machine.disk.bytes();
        if image_size > disk {
            return Err(ApiError::permanent(format!(
                "the image's disk is {image_size} bytes, larger than the machine type's disk of {disk} bytes; \
                 raise the machine type's disk"
            )));
        }
        Ok(())
    }

    /// The seed ISO: the request's user data and the proxy's vendor data.
    fn seed(
        &self,
        created_at: Timestamp,
        auth: Option<&vendor_data::PasswordLine>,
    ) -> Result<Vec<u8>, ApiError> {
        let vendor = vendor_data::render(&self.inner.config.proxy, auth).map_err(ApiError::from)?;
        let seed = seed_iso::build(&SeedSpec {
            instance_id: self.name,
            hostname: self.name,
            user_data: self.req.user_data.as_ref(),
            vendor_data: &vendor,
            time: created_at,
            size_limit: self.inner.options.seed_size_limit,
        })
        .map_err(ApiError::from)?;
        Ok(seed)
    }

    /// Pool space for the seed and the overlay's reserve, before anything
    /// per-VM is made (vCPUs and memory were admitted with the host).
    async fn check_capacity(&self, ops: &PoolOps<'_>, seed_len: u64) -> Result<(), ApiError> {
        let options = &self.inner.options;
        if !options.capacity_check {
            return Ok(());
        }
        let needed = seed_len.saturating_add(options.overlay_reserve);
        capacity::check_pool(
            &self.host.name,
            &self.host.pool,
            ops.available().await?,
            needed,
        )
    }

    /// The overlay on the base and the seed volume. Leftovers of a
    /// cancelled Create for this owner (the domain does not exist, and the
    /// names are this owner's) are replaced.
    async fn make_volumes(
        &self,
        ops: &PoolOps<'_>,
        seed: &[u8],
        made: &mut Made,
    ) -> Result<VolumePaths, ApiError> {
        let vols = VmVolumes::new(&self.inner.name, self.name);
        made.overlay = true;
        ops.remove(&vols.overlay()).await?;
        let overlay_xml = overlay_volume(
            &vols.overlay(),
            self.machine.disk.bytes(),
            &self.base.path,
            self.base.format,
        )
        .map_err(ApiError::from)?;
        let overlay = ops.create(&vols.overlay(), &overlay_xml).await?;
        let overlay = disk_path("overlay path", &ops.path(&overlay).await?)?;

        made.seed = true;
        ops.remove(&vols.seed()).await?;
        let seed_vol = ops.write_small(&vols.seed(), seed).await?;
        let seed = disk_path("seed path", &ops.path(&seed_vol).await?)?;
        Ok(VolumePaths { overlay, seed })
    }

    /// Renders the domain XML with the ownership mark and defines it.
    async fn define(
        &self,
        created_at: Timestamp,
        paths: VolumePaths,
    ) -> Result<libvirt_rpc::Domain, ApiError> {
        let inner = self.inner;
        let spec = DomainSpec {
            domain_type: inner.config.domain_type,
            name: self.name.clone(),
            memory: MemoryMib::new(self.machine.memory.mib())?,
            vcpus: Vcpus::new(self.machine.vcpus)?,
            machine: MachineName::parse(&inner.options.machine)?,
            firmware: BootFirmware::from_config(inner.config.firmware)?,
            overlay_path: paths.overlay,
            seed_path: paths.seed,
            bridge: self.host.bridge.clone(),
            mac: None,
            mark: OwnerMark::new(self.req.owner_uid.clone(), inner.name.clone(), created_at)
                .with_tags(&self.req.tags)?,
        };
        let xml = domain_xml::render(&spec).map_err(ApiError::from)?;
        let (h, name) = (&self.host.name, self.name);
        observed(
            h,
            proc_num::DOMAIN_DEFINE_XML_FLAGS,
            self.client
                .domain_define_xml_flags(&xml, DomainDefineFlags::VALIDATE),
        )
        .await
        .map_err(|e| to_provider_error(format!("host {h}: define domain {name}"), e))
    }
}

/// Starts a defined domain. A start that fails for want of memory or disk
/// is QuotaExceeded (the host is full now), not Transient.
async fn start(
    host: &Identifier,
    client: &Client,
    dom: &libvirt_rpc::Domain,
) -> Result<(), ApiError> {
    observed(
        host,
        proc_num::DOMAIN_CREATE_WITH_FLAGS,
        client.domain_create_with_flags(dom, DomainCreateFlags::empty()),
    )
    .await
    .map(|_| ())
    .map_err(|e| {
        let detail = e.to_string();
        let err = to_provider_error(format!("host {host}: start domain {}", dom.name), e);
        let class = start_failure_class(&detail, err.class());
        if class == err.class() {
            err
        } else {
            let message = format!("{} (the host lacks memory or disk now)", err.message());
            err.restate(class, message)
        }
    })
}

/// Watches a just-started domain for `period`: crashed, shut off or paused
/// (other than libvirt's own start-up pause) is a failure.
async fn watch_start(
    host: &Identifier,
    client: &Client,
    dom: &libvirt_rpc::Domain,
    period: Duration,
) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + period;
    loop {
        let info = observed(
            host,
            proc_num::DOMAIN_GET_STATE,
            client.domain_get_state(dom, NoFlags::empty()),
        )
        .await
        .map_err(|e| to_provider_error(format!("host {host}: state of {}", dom.name), e))?;
        if let Err(detail) = start_verdict(info.state_reason()) {
            return Err(ApiError::transient(format!(
                "domain {} on host {host} failed right after start ({detail})",
                dom.name
            )));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// The immediate verdict on a just-started domain's `(state, reason)`:
/// fine while starting or running; otherwise libvirt's state and reason in
/// words (crashed, shut off, paused by an error or a user).
fn start_verdict(state: StateReason) -> Result<(), String> {
    let verdict = classify(state);
    match verdict.phase {
        DomainPhase::Running | DomainPhase::Starting => Ok(()),
        DomainPhase::Stopped | DomainPhase::Failed => Err(verdict.detail),
    }
}

/// Removes what a failed Create made, within the cleanup budget; failures
/// are logged (the next Create for the owner, or Delete, finishes the job).
async fn undo(inner: &Inner, host: &Kvm2Host, name: &Identifier, made: &Made) {
    let work = async {
        let conn = inner.hosts.shared(&host.name).await?;
        let client = conn.client();
        let h = &host.name;
        if made.domain {
            DomainOps::new(&conn).remove(name).await?;
        }
        let ops = PoolOps::open(h, client, &host.pool).await?;
        let vols = VmVolumes::new(&inner.name, name);
        if made.seed {
            ops.remove(&vols.seed()).await?;
        }
        if made.overlay {
            ops.remove(&vols.overlay()).await?;
        }
        Ok::<_, ApiError>(())
    };
    match tokio::time::timeout(inner.images.cleanup_budget(), work).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(host = %host.name, instance = %name, error = %chain(&e), "could not undo a failed create");
        }
        Err(_) => {
            tracing::warn!(host = %host.name, instance = %name, "undoing a failed create timed out");
        }
    }
}

/// An existing domain with the instance's name and this owner's mark from
/// this entry (the caller checked): returned, started if shut off.
async fn existing(
    inner: &Inner,
    host: &Kvm2Host,
    conn: &Connection,
    dom: libvirt_rpc::Domain,
    mark: &OwnerMark,
    id: ProviderId,
) -> Result<Instance, ApiError> {
    let h = &host.name;
    let client = conn.client();
    let info = observed(
        h,
        proc_num::DOMAIN_GET_STATE,
        client.domain_get_state(&dom, NoFlags::empty()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {h}: state of {}", dom.name), e))?;
    let mut verdict = classify(info.state_reason());
    if verdict.phase == DomainPhase::Stopped {
        start(h, client, &dom).await?;
        watch_start(h, client, &dom, inner.options.start_watch).await?;
        verdict = classify(StateReason::Running(RunningReason::Unspecified));
    }
    let state = match verdict.instance_state() {
        // Create reports no address: `get` does.
        InstanceState::Running => InstanceState::Provisioning,
        other => other,
    };
    Ok(Instance::new(
        id,
        state,
        None,
        Some(mark.created_at().to_system_time()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_never_answers_not_found() {
        let gone = ApiError::not_found("host h1: path of volume x: no storage vol");
        let e = not_found_is_transient(gone);
        assert_eq!(e.class(), ErrorClass::Transient);
        assert!(e.message().contains("no storage vol"), "{e}");
        let other = not_found_is_transient(ApiError::permanent("bad"));
        assert_eq!(other.class(), ErrorClass::Permanent);
    }

    #[test]
    fn one_create_per_instance_name_at_a_time() {
        let creating = Creating::default();
        let a = Identifier::parse("ep-a").unwrap();
        let b = Identifier::parse("ep-b").unwrap();
        let claim = creating.try_claim(&a).unwrap();
        assert!(creating.try_claim(&a).is_none());
        let other = creating.try_claim(&b).unwrap();
        drop(claim);
        assert!(creating.try_claim(&a).is_some());
        drop(other);
    }

    #[test]
    fn start_verdicts() {
        use libvirt_rpc::{CrashedReason, PausedReason, ShutoffReason};
        assert!(start_verdict(StateReason::Running(RunningReason::Booted)).is_ok());
        // libvirt starts domains paused, then resumes them.
        assert!(start_verdict(StateReason::Paused(PausedReason::StartingUp)).is_ok());
        for state in [
            StateReason::Crashed(CrashedReason::Unspecified),
            StateReason::Shutoff(ShutoffReason::Saved),
            StateReason::Shutoff(ShutoffReason::Failed),
            StateReason::Paused(PausedReason::User),
            StateReason::Paused(PausedReason::IoError),
        ] {
            let detail = start_verdict(state).unwrap_err();
            assert!(!detail.is_empty(), "{state:?}");
        }
        assert!(
            start_verdict(StateReason::Paused(PausedReason::IoError))
                .unwrap_err()
                .contains("paused")
        );
    }
}

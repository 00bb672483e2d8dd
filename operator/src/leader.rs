//! Leader election on a `coordination.k8s.io/v1` Lease: an owned loop.
//!
//! * **Acquire**: the Lease is taken when it is absent, has no holder, or
//!   its record (holder, renew time) has not changed for a whole lease
//!   duration *as this replica observed it* — local monotonic time, so clock
//!   skew between replicas does not matter (client-go's rule). Writes use the
//!   Lease's resourceVersion: of two replicas racing, one gets 409 and stays
//!   a follower.
//! * **Hold**: renewed every third of the duration. Leadership is valid until
//!   the last successful renewal's *request start* plus the duration minus a
//!   safety margin; [`Leadership::holds`] answers from that, without I/O, so
//!   the GC can re-check it before each delete.
//! * **Lose**: a renewal that finds another holder, or no successful renewal
//!   before validity ends, cancels [`Leadership::lost`]; the operator then
//!   exits (its leader-only work stops at once).
//! * **Release**: on shutdown the holder clears `holderIdentity` (bounded by a
//!   timeout), so a successor need not wait out the duration.

use provider_api::error::chain;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The Lease's settings.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a Lease holds without renewal.
    pub duration: Duration,
}

impl LeaseConfig {
    fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    /// The margin taken off validity (clock rate differences, request
    /// latency).
    fn margin(&self) -> Duration {
        self.duration / 5
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// This replica's view of its leadership (cheap to clone).
#[derive(Debug, Clone)]
pub struct Leadership {
    valid_until: Arc<Mutex<Option<Instant>>>,
    lost: CancellationToken,
}

impl Leadership {
    /// Whether this replica holds the lease now (no I/O).
    pub fn holds(&self) -> bool {
        if self.lost.is_cancelled() {
            return false;
        }
        let until = *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        until.is_some_and(|u| Instant::now() < u)
    }

    /// Cancelled when leadership, once held, is lost.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    fn set_valid_until(&self, until: Option<Instant>) {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = until;
    }
}

/// What the remote record looked like, and when this replica first saw it
/// so.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    holder: Option<String>,
    renew: Option<String>,
    since: Instant,
}

/// The elector: acquire with [`Elector::acquire`], then run [`Elector::hold`]
/// in a task owned by the caller.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    leadership: Leadership,
    observed: Option<Observed>,
}

enum Attempt {
    Held { started: Instant },
    Other(String),
}

impl Elector {
    /// An elector for the Lease `config.name` in `api`'s namespace.
    pub fn new(api: Api<Lease>, config: LeaseConfig) -> Self {
        Elector {
            api,
            config,
            leadership: Leadership {
                valid_until: Arc::new(Mutex::new(None)),
                lost: CancellationToken::new(),
            },
            observed: None,
        }
    }

    /// The leadership handle.
    pub fn leadership(&self) -> Leadership {
        self.leadership.clone()
    }

    /// Tries until the Lease is acquired (`true`) or `cancel` fires
    /// (`false`). Each attempt is bounded by the renewal interval.
    pub async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        loop {
            match self.attempt_bounded().await {
                Ok(Attempt::Held { started }) => {
                    self.leadership
                        .set_valid_until(Some(self.valid_from(started)));
                    tracing::info!(lease = %self.config.name, identity = %self.config.identity, "leadership acquired");
                    return true;
                }
                Ok(Attempt::Other(holder)) => {
                    tracing::debug!(lease = %self.config.name, %holder, "lease held by another replica");
                }
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %chain(e.as_ref()), "lease acquire attempt failed")
                }
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = tokio::time::sleep(self.config.renew_every()) => {}
            }
        }
    }

    /// Renews until `cancel` fires (then releases the Lease, bounded) or
    /// leadership is lost (then cancels [`Leadership::lost`]).
    pub async fn hold(mut self, cancel: CancellationToken) {
        loop {
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(self.config.renew_every()) => {}
            }
            match self.attempt_bounded().await {
                Ok(Attempt::Held { started }) => {
                    self.leadership
                        .set_valid_until(Some(self.valid_from(started)));
                }
                Ok(Attempt::Other(holder)) => {
                    tracing::error!(lease = %self.config.name, %holder, "leadership lost: the lease has another holder");
                    self.lose();
                    return;
                }
                Err(e) => {
                    if self.leadership.holds() {
                        tracing::warn!(lease = %self.config.name, error = %chain(e.as_ref()), "lease renewal failed; retrying while still valid");
                    } else {
                        tracing::error!(lease = %self.config.name, error = %chain(e.as_ref()), "leadership lost: not renewed in time");
                        self.lose();
                        return;
                    }
                }
            }
        }
        self.release().await;
    }

    fn lose(&self) {
        self.leadership.set_valid_until(None);
        self.leadership.lost.cancel();
    }

    fn valid_from(&self, started: Instant) -> Instant {
        started + self.config.duration.saturating_sub(self.config.margin())
    }

    async fn attempt_bounded(&mut self) -> anyhow::Result<Attempt> {
        let bound = self.config.renew_every().max(Duration::from_secs(1));
        match tokio::time::timeout(bound, self.attempt()).await {
            Ok(r) => r,
            Err(_) => anyhow::bail!("no answer from the API server within {bound:?}"),
        }
    }

    /// One get-then-write round.
    async fn attempt(&mut self) -> anyhow::Result<Attempt> {
        let started = Instant::now();
        let me = self.config.identity.clone();
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            let mut lease = Lease::default();
            lease.metadata.name = Some(self.config.name.clone());
            lease.spec = Some(LeaseSpec {
                holder_identity: Some(me),
                lease_duration_seconds: Some(self.config.duration_secs()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            });
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Attempt::Held { started }),
                Err(kube::Error::Api(s)) if s.code == 409 => {
                    Ok(Attempt::Other("(racing creator)".into()))
                }
                Err(e) => Err(e.into()),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = Observed {
            holder: holder.clone(),
            renew: spec.renew_time.as_ref().map(|t| t.0.to_string()),
            since: started,
        };
        let observed_since = match &self.observed {
            Some(o) if o.holder == record.holder && o.renew == record.renew => o.since,
            _ => {
                self.observed = Some(record);
                started
            }
        };
        let mine = holder.as_deref() == Some(me.as_str());
        let expired = started.duration_since(observed_since) >= self.config.duration;
        if !mine && holder.is_some() && !expired {
            return Ok(Attempt::Other(holder.unwrap_or_default()));
        }
        if !mine {
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.holder_identity = Some(me);
        spec.renew_time = Some(now);
        spec.lease_duration_seconds = Some(self.config.duration_secs());
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = None;
                Ok(Attempt::Held { started })
            }
            // Someone wrote in between: whoever it was, we do not hold it now.
            Err(kube::Error::Api(s)) if s.code == 409 => {
                Ok(Attempt::Other("(concurrent writer)".into()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Clears the holder if it is still us (bounded: 5 s).
    async fn release(&self) {
        self.leadership.set_valid_until(None);
        let me = self.config.identity.clone();
        let release = async {
            let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
                return Ok::<(), kube::Error>(());
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(me.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await?;
            Ok(())
        };
        match tokio::time::timeout(Duration::from_secs(5), release).await {
            Ok(Ok(())) => tracing::info!(lease = %self.config.name, "lease released"),
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.config.name, error = %chain(&e), "lease release failed")
            }
            Err(_) => tracing::warn!(lease = %self.config.name, "lease release timed out"),
        }
    }
}

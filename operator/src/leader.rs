//! Leader election on a `coordination.k8s.io/v1` Lease: an owned loop.
//!
//! * **Acquire**: the Lease is taken when it is absent, has no holder, is
//!   held by this replica's own identity (a record left by an earlier term
//!   of this process), or its record (holder, renew time) has not changed
//!   for a whole lease duration *as this replica observed it* — local
//!   monotonic time, so clock skew between replicas does not matter
//!   (client-go's rule). Writes use the Lease's resourceVersion: of two
//!   replicas racing, one gets 409 and stays a follower.
//! * **Hold**: renewed every third of the duration. Leadership is valid until
//!   the last successful renewal's *request start* plus the duration minus a
//!   safety margin; [`Leadership::holds`] answers from that, without I/O, so
//!   the GC can re-check it before each delete.
//! * **Lose**: a renewal that finds another holder, or the validity running
//!   out before a renewal succeeded, cancels [`Leadership::lost`] — at the
//!   validity's end at the latest, not when a hung renewal gives up, so the
//!   loss is declared a whole margin before any other replica can take the
//!   Lease (invariant 15). The caller then stops its leader-only work at once and may
//!   campaign again with a new [`Elector`]: one elector, and one
//!   [`Leadership`], per term.
//! * **Release**: on shutdown the holder clears `holderIdentity` (bounded by a
//!   timeout), so a successor need not wait out the duration.
//!
//! Every wait is bounded: each attempt by the renewal interval, acquiring
//! and holding by the caller's cancellation token (also mid-attempt).

use provider_api::error::chain;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long releasing the Lease may take (a read and a write).
pub const RELEASE_BOUND: Duration = Duration::from_secs(5);

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

/// How long a record must stay unchanged, as this replica observes it,
/// before another holder's Lease counts as expired: the holder's own
/// duration (`leaseDurationSeconds`, which its validity is computed from),
/// never less than this replica's.
fn takeover_after(own: Duration, record_secs: Option<i32>) -> Duration {
    let theirs = record_secs
        .and_then(|s| u64::try_from(s).ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    own.max(theirs)
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
        self.valid_until().is_some_and(|u| Instant::now() < u)
    }

    /// A leadership held for `d` from now (tests of its readers).
    #[cfg(test)]
    pub fn held_for(d: Duration) -> Leadership {
        Leadership {
            valid_until: Arc::new(Mutex::new(Some(Instant::now() + d))),
            lost: CancellationToken::new(),
        }
    }

    /// Cancelled when this term's leadership, once held, is lost.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    fn valid_until(&self) -> Option<Instant> {
        *self
            .valid_until
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

/// The elector of one term: acquire with [`Elector::acquire`], then run
/// [`Elector::hold`] in a task owned by the caller. After a loss, campaign
/// with a new elector (its [`Leadership`] is new too).
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
    ///
    /// # Cancel safety
    /// `cancel` is honoured mid-attempt too: the request in flight is
    /// dropped and `false` returned at once.
    pub async fn acquire(&mut self, cancel: &CancellationToken) -> bool {
        loop {
            let attempt = tokio::select! {
                () = cancel.cancelled() => return false,
                r = self.attempt_bounded() => r,
            };
            match attempt {
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

    /// Renews until `cancel` fires (then releases the Lease, bounded: fire it
    /// only once the term's work has ended, since a successor may start the
    /// moment the Lease is free) or
    /// leadership is lost (then cancels [`Leadership::lost`]): another
    /// holder was found, or the validity ran out — noticed when it ends,
    /// even while a renewal hangs.
    pub async fn hold(mut self, cancel: CancellationToken) {
        loop {
            // Set by `acquire`; none means the term never began.
            let Some(until) = self.leadership.valid_until() else {
                self.lose();
                return;
            };
            let lapsed = tokio::time::sleep_until(until);
            tokio::select! {
                () = cancel.cancelled() => break,
                () = tokio::time::sleep(self.config.renew_every()) => {}
                () = lapsed => {
                    self.lapse();
                    return;
                }
            }
            let attempt = tokio::select! {
                () = cancel.cancelled() => break,
                r = self.attempt_bounded() => r,
                () = tokio::time::sleep_until(until) => {
                    self.lapse();
                    return;
                }
            };
            match attempt {
                Ok(Attempt::Held { started }) => {
                    self.leadership
                        .set_valid_until(Some(self.valid_from(started)));
                }
                Ok(Attempt::Other(holder)) => {
                    tracing::warn!(lease = %self.config.name, %holder, "leadership lost: the lease has another holder");
                    self.lose();
                    return;
                }
                Err(e) => {
                    tracing::warn!(lease = %self.config.name, error = %chain(e.as_ref()), "lease renewal failed; retrying while still valid");
                }
            }
        }
        self.release().await;
    }

    fn lose(&self) {
        self.leadership.set_valid_until(None);
        self.leadership.lost.cancel();
    }

    fn lapse(&self) {
        tracing::warn!(lease = %self.config.name, "leadership lost: not renewed before its validity ended");
        self.lose();
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
        let expired = started.duration_since(observed_since)
            >= takeover_after(self.config.duration, spec.lease_duration_seconds);
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

    /// Clears the holder if it is still us (bounded: [`RELEASE_BOUND`]).
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
        match tokio::time::timeout(RELEASE_BOUND, release).await {
            Ok(Ok(())) => tracing::info!(lease = %self.config.name, "lease released"),
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.config.name, error = %chain(&e), "lease release failed")
            }
            Err(_) => tracing::warn!(lease = %self.config.name, "lease release timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::silent::Silent;

    /// An elector whose API server accepts connections and never answers.
    fn elector_of(silent: &Silent, duration: Duration) -> Elector {
        let uri: http::Uri = format!("http://127.0.0.1:{}", silent.port())
            .parse()
            .unwrap();
        let client = kube::Client::try_from(kube::Config::new(uri)).unwrap();
        Elector::new(
            Api::namespaced(client, "ns"),
            LeaseConfig {
                name: "lease".into(),
                identity: "me".into(),
                duration,
            },
        )
    }

    #[test]
    fn a_holder_with_a_longer_lease_is_waited_out_for_its_own_duration() {
        let own = Duration::from_secs(15);
        // The holder's validity runs 60 s less its margin: taking over after
        // our 15 s would overlap two terms.
        assert_eq!(takeover_after(own, Some(60)), Duration::from_secs(60));
        assert_eq!(takeover_after(own, Some(5)), own);
        assert_eq!(takeover_after(own, None), own);
        assert_eq!(takeover_after(own, Some(-3)), own);
    }

    #[tokio::test]
    async fn a_hung_renewal_loses_leadership_when_validity_ends_not_when_it_gives_up() {
        let silent = Silent::start().await;
        // Renewals every 1 s, each bounded by 1 s: the first one hangs from
        // 1 s to 2 s, past the validity's end at 1.5 s.
        let elector = elector_of(&silent, Duration::from_secs(3));
        let leadership = elector.leadership();
        let start = Instant::now();
        leadership.set_valid_until(Some(start + Duration::from_millis(1500)));
        assert!(leadership.holds());
        let hold = tokio::spawn(elector.hold(CancellationToken::new()));
        tokio::time::timeout(Duration::from_secs(5), leadership.lost().cancelled())
            .await
            .expect("leadership lost");
        let at = start.elapsed();
        assert!(
            at >= Duration::from_millis(1500) && at < Duration::from_millis(1900),
            "lost after {at:?}"
        );
        assert!(!leadership.holds());
        tokio::time::timeout(Duration::from_secs(1), hold)
            .await
            .expect("hold returns once lost")
            .unwrap();
    }

    #[tokio::test]
    async fn cancel_ends_a_campaign_mid_attempt() {
        let silent = Silent::start().await;
        // Attempts bounded by 10 s: only the cancellation ends this one.
        let mut elector = elector_of(&silent, Duration::from_secs(30));
        let cancel = CancellationToken::new();
        let start = Instant::now();
        let campaign = elector.acquire(&cancel);
        let cancelling = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel();
        };
        let (acquired, ()) = tokio::time::timeout(Duration::from_secs(5), async {
            tokio::join!(campaign, cancelling)
        })
        .await
        .expect("the campaign ends on cancel");
        assert!(!acquired);
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert!(
            silent.accepted() >= 1,
            "the attempt never reached the server"
        );
    }
}

//! Who may read `/proxies` and `/metrics` and take `/leases`: a bearer token the API server
//! vouches for (TokenReview), asking it what that caller may do
//! (SubjectAccessReview). `fleet::access` decides; this module asks.
//!
//! ```text
//!  request ─▶ Auth::authenticate ── no bearer token ──────────────────▶ 401
//!               │ SHA-256 of the token ─▶ identities (TtlCache) ── miss ─▶ TokenReview
//!               ▼                                    not authenticated ─▶ 401
//!             Caller ─▶ Auth::metrics   (get /metrics)         ── no ──▶ 403
//!                    ─▶ Auth::discovery (list proxies: cluster-wide, else
//!                         per namespace) ─▶ decisions (TtlCache) ── miss ─▶ SubjectAccessReview
//!                         ─▶ fleet::access::Scope              ── none ─▶ 403
//!                    ─▶ Auth::leasing   (lease proxies in the namespace)  ── no ──▶ 403
//!  a review failing, or the request's deadline passing ───────────────────▶ 503
//! ```
//!
//! Policies:
//! * **Deadline**: the checks of one request share one deadline
//!   (`--http-auth-timeout`); every review the request makes ends by then.
//!   A review that fails or runs out of time answers 503 — never 200, never
//!   401 — and is logged (the API server's message, never the token).
//! * **Caches**: answers are kept `--http-auth-cache-ttl` (`0`: none) in
//!   two [`TtlCache`]s of [`CACHE_CAPACITY`] entries each (their overflow
//!   policy: expired entries first, then the oldest), keyed by the token's
//!   SHA-256 digest, so the token itself is never stored. Refusals are
//!   cached like grants: a flood of bad tokens costs one TokenReview per
//!   token, not per request. A revoked token, a deleted ServiceAccount or
//!   a removed grant keeps working at most one TTL.
//! * **Fan-out**: per-namespace questions go [`FAN_OUT`] at a time.
//! * **Secrets** (invariant 9): the token is a [`BearerToken`] (redacted
//!   `Debug`, no `Display`); it leaves this module only in a TokenReview's
//!   body, which kube's request tracing does not record.

use provider_api::error::chain;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fleet::TtlCache;
use fleet::access::{BearerToken, Question, Scope};
use futures::StreamExt;
use hyper::HeaderMap;
use hyper::StatusCode;
use hyper::header::AUTHORIZATION;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, UserInfo};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use crate::crd::Proxy;
use crate::metrics::OperatorMetrics;

/// Entries each cache holds at most.
pub const CACHE_CAPACITY: usize = 4096;
/// Per-namespace SubjectAccessReviews one request has in flight at most.
pub const FAN_OUT: usize = 8;

/// How callers of `/proxies` and `/metrics` are checked.
pub enum Auth {
    /// Not at all (`--http-auth=none`, local development).
    Off,
    /// A bearer token, reviewed by the API server.
    Kubernetes(Box<Reviewer>),
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No bearer token, or one the API server does not vouch for (401).
    Unauthenticated,
    /// An authenticated caller without the right (403).
    Forbidden,
    /// A review failed or ran out of time: nobody knows (503).
    Unavailable,
}

impl Refusal {
    /// The HTTP status it is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Unauthenticated => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden => StatusCode::FORBIDDEN,
            Refusal::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Its word in `egress_proxies_operator_http_auth_total`.
    pub fn outcome(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::Forbidden => "forbidden",
            Refusal::Unavailable => "unavailable",
        }
    }

    /// Its word in `/leases`' JSON answers.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "Unauthenticated",
            Refusal::Forbidden => "Forbidden",
            Refusal::Unavailable => "Unavailable",
        }
    }

    /// The body it is answered with.
    pub fn body(self) -> &'static str {
        match self {
            Refusal::Unauthenticated => "a valid bearer token is required\n",
            Refusal::Forbidden => "forbidden\n",
            Refusal::Unavailable => "cannot check the caller's access now; retry\n",
        }
    }
}

/// An authenticated caller (or anyone, with auth off), until the request's
/// deadline.
pub struct Caller {
    who: Option<Reviewed>,
}

struct Reviewed {
    digest: TokenDigest,
    user: Arc<UserInfo>,
    deadline: Instant,
}

impl Caller {
    /// The caller's user name, for logs (`-` with auth off).
    pub fn name(&self) -> &str {
        self.who
            .as_ref()
            .and_then(|r| r.user.username.as_deref())
            .unwrap_or("-")
    }
}

type TokenDigest = [u8; 32];

/// Asks the API server who a token belongs to and what it may do, and
/// keeps the answers a while.
pub struct Reviewer {
    client: Client,
    timeout: Duration,
    /// The caches' clock origin (they take time since it).
    origin: Instant,
    identities: Mutex<TtlCache<TokenDigest, Option<Arc<UserInfo>>>>,
    decisions: Mutex<TtlCache<(TokenDigest, Question), bool>>,
    metrics: OperatorMetrics,
}

impl Reviewer {
    /// A reviewer over `client`: answers kept `cache_ttl` (`None`: not at
    /// all), each request's checks bounded by `timeout`.
    pub fn new(
        client: Client,
        cache_ttl: Option<Duration>,
        timeout: Duration,
        metrics: OperatorMetrics,
    ) -> Self {
        let ttl = cache_ttl.unwrap_or(Duration::ZERO);
        Reviewer {
            client,
            timeout,
            origin: Instant::now(),
            identities: Mutex::new(TtlCache::new(ttl, CACHE_CAPACITY)),
            decisions: Mutex::new(TtlCache::new(ttl, CACHE_CAPACITY)),
            metrics,
        }
    }

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Who holds `token` (`None`: the API server does not vouch for it).
    async fn identity(
        &self,
        token: &BearerToken,
        digest: TokenDigest,
    ) -> Result<Option<Arc<UserInfo>>, Refusal> {
        let cached = lock(&self.identities).get(&digest, self.now());
        if let Some(known) = cached {
            self.metrics.http_auth_review("token", "cache");
            return Ok(known);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.secret().to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("TokenReview", &e))?;
        self.metrics.http_auth_review("token", "api");
        let status = answer.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) if user.username.is_some() => Some(Arc::new(user)),
            _ => None,
        };
        lock(&self.identities).insert(digest, user.clone(), self.now());
        Ok(user)
    }

    /// Whether the caller may do what `question` asks.
    async fn allowed(&self, caller: &Reviewed, question: Question) -> Result<bool, Refusal> {
        let key = (caller.digest, question);
        let cached = lock(&self.decisions).get(&key, self.now());
        if let Some(allowed) = cached {
            self.metrics.http_auth_review("access", "cache");
            return Ok(allowed);
        }
        let (resource_attributes, non_resource_attributes) = match &key.1 {
            Question::ListProxies { namespace } => (
                Some(ResourceAttributes {
                    group: Some(<Proxy as kube::Resource>::group(&()).into_owned()),
                    resource: Some(<Proxy as kube::Resource>::plural(&()).into_owned()),
                    verb: Some("list".into()),
                    namespace: namespace.clone(),
                    ..ResourceAttributes::default()
                }),
                None,
            ),
            Question::LeaseProxies { namespace } => (
                Some(ResourceAttributes {
                    group: Some(<Proxy as kube::Resource>::group(&()).into_owned()),
                    resource: Some(<Proxy as kube::Resource>::plural(&()).into_owned()),
                    verb: Some("lease".into()),
                    namespace: Some(namespace.clone()),
                    ..ResourceAttributes::default()
                }),
                None,
            ),
            Question::GetMetrics => (
                None,
                Some(NonResourceAttributes {
                    path: Some("/metrics".into()),
                    verb: Some("get".into()),
                }),
            ),
        };
        let user = &caller.user;
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                groups: user.groups.clone(),
                uid: user.uid.clone(),
                extra: user.extra.clone(),
                resource_attributes,
                non_resource_attributes,
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("SubjectAccessReview", &e))?;
        self.metrics.http_auth_review("access", "api");
        let allowed = answer.status.is_some_and(|s| s.allowed);
        lock(&self.decisions).insert(key, allowed, self.now());
        Ok(allowed)
    }
}

impl Auth {
    /// The caller of a request with `headers`.
    ///
    /// # Errors
    /// [`Refusal::Unauthenticated`] without a bearer token or with one the
    /// API server does not vouch for; [`Refusal::Unavailable`] when the
    /// TokenReview fails or outlives the request's deadline.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the review in flight; nothing is
    /// cached from it.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Refusal> {
        let reviewer = match self {
            Auth::Off => return Ok(Caller { who: None }),
            Auth::Kubernetes(r) => r,
        };
        let deadline = Instant::now() + reviewer.timeout;
        let token = headers
            .get(AUTHORIZATION)
            .and_then(|v| BearerToken::from_header(v.as_bytes()))
            .ok_or(Refusal::Unauthenticated)?;
        let digest: TokenDigest = Sha256::digest(token.secret().as_bytes()).into();
        let user = bounded(deadline, reviewer.identity(&token, digest))
            .await?
            .ok_or(Refusal::Unauthenticated)?;
        Ok(Caller {
            who: Some(Reviewed {
                digest,
                user,
                deadline,
            }),
        })
    }

    /// Whether `caller` may read `/metrics` (`get` on the non-resource URL).
    ///
    /// # Errors
    /// [`Refusal::Forbidden`] when it may not; [`Refusal::Unavailable`] as
    /// for [`Auth::authenticate`].
    pub async fn metrics(&self, caller: &Caller) -> Result<(), Refusal> {
        let (Auth::Kubernetes(reviewer), Some(who)) = (self, &caller.who) else {
            return Ok(());
        };
        let allowed = bounded(who.deadline, reviewer.allowed(who, Question::GetMetrics)).await?;
        if allowed {
            Ok(())
        } else {
            Err(Refusal::Forbidden)
        }
    }

    /// Whether `caller` may lease Proxies in `namespace` (the verb `lease`
    /// on `proxies.egress-proxies.io` there, granted by a Role or a
    /// ClusterRole).
    ///
    /// # Errors
    /// [`Refusal::Forbidden`] when it may not; [`Refusal::Unavailable`] as
    /// for [`Auth::authenticate`].
    pub async fn leasing(&self, caller: &Caller, namespace: &str) -> Result<(), Refusal> {
        let (Auth::Kubernetes(reviewer), Some(who)) = (self, &caller.who) else {
            return Ok(());
        };
        let question = Question::LeaseProxies {
            namespace: namespace.to_owned(),
        };
        if bounded(who.deadline, reviewer.allowed(who, question)).await? {
            Ok(())
        } else {
            Err(Refusal::Forbidden)
        }
    }

    /// The namespaces whose Proxies `caller` may see: every one when it may
    /// list Proxies cluster-wide, else those of `query_namespace` (or, without
    /// it, of `cached`: the namespaces in the watch cache) where it may.
    ///
    /// # Errors
    /// [`Refusal::Forbidden`] when it may list Proxies in none of them;
    /// [`Refusal::Unavailable`] as for [`Auth::authenticate`] (any one
    /// review failing fails the request).
    pub async fn discovery(
        &self,
        caller: &Caller,
        query_namespace: Option<&str>,
        cached: &BTreeSet<&str>,
    ) -> Result<Scope, Refusal> {
        let (Auth::Kubernetes(reviewer), Some(who)) = (self, &caller.who) else {
            return Ok(Scope::All);
        };
        let decide = async {
            if reviewer.allowed(who, Question::list_proxies(None)).await? {
                return Ok(Scope::All);
            }
            let namespaces =
                fleet::access::namespaces_to_ask(query_namespace, cached.iter().copied());
            let answers: Vec<Result<(String, bool), Refusal>> = futures::stream::iter(namespaces)
                .map(|ns| async move {
                    let allowed = reviewer
                        .allowed(who, Question::list_proxies(Some(&ns)))
                        .await?;
                    Ok((ns, allowed))
                })
                .buffer_unordered(FAN_OUT)
                .collect()
                .await;
            let answers = answers.into_iter().collect::<Result<Vec<_>, _>>()?;
            Scope::from_answers(false, answers).ok_or(Refusal::Forbidden)
        };
        bounded(who.deadline, decide).await
    }
}

/// `fut`, or [`Refusal::Unavailable`] once `deadline` passes.
async fn bounded<T>(
    deadline: Instant,
    fut: impl Future<Output = Result<T, Refusal>>,
) -> Result<T, Refusal> {
    match tokio::time::timeout_at(deadline, fut).await {
        Ok(r) => r,
        Err(_) => {
            tracing::warn!("http auth: the API server did not answer before the deadline");
            Err(Refusal::Unavailable)
        }
    }
}

fn unavailable(review: &str, e: &kube::Error) -> Refusal {
    // kube's errors carry the API server's message and the URL, never the
    // request body (where the token is).
    tracing::warn!(review, error = %chain(e), "http auth: review failed");
    Refusal::Unavailable
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The critical sections cannot panic midway (a map insert or lookup);
    // a poisoned lock still holds a consistent cache.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_answer_their_own_status() {
        for (refusal, code, outcome) in [
            (Refusal::Unauthenticated, 401, "unauthenticated"),
            (Refusal::Forbidden, 403, "forbidden"),
            (Refusal::Unavailable, 503, "unavailable"),
        ] {
            assert_eq!(refusal.status().as_u16(), code, "{refusal:?}");
            assert_eq!(refusal.outcome(), outcome);
            assert_eq!(refusal.reason().to_lowercase(), outcome);
            assert!(refusal.body().ends_with('\n'));
        }
    }
}

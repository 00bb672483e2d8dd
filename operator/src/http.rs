//! The HTTP endpoints every replica serves: `/metrics` (Prometheus text),
//! `/healthz` (the process serves), `/readyz` (the Proxy watch cache is
//! synced) and `/proxies` (discovery, from the watch cache, filtered by
//! `namespace` and `healthy`). They run for the process's life, across
//! leadership terms: readiness does not depend on leading (a follower, or a
//! replica campaigning after an outage, serves discovery correctly;
//! `egress_proxies_operator_leader` tells who leads).
//!
//! `/healthz` and `/readyz` are open (the kubelet probes them). `/metrics`
//! and `/proxies` need a bearer token unless `--http-auth=none`
//! ([`auth`]): `/metrics` a caller allowed `get` on the non-resource URL
//! `/metrics`; `/proxies` one allowed to `list` Proxies, and it lists only
//! the namespaces where it is; a check that cannot be made is 503
//! (invariant 16). `/leases` (consumer leases, [`crate::leases`]: `POST
//! /leases?namespace=`, `PUT` and `DELETE /leases/<namespace>/<proxy>/<id>`)
//! needs a caller allowed to `lease` Proxies in the namespace. A method an
//! endpoint does not serve is 405 and an unknown path 404 before any check.
//!
//! Each connection runs in a task of a `JoinSet` the server owns, bounded
//! to [`CONNECTION_LIFETIME`]; cancelling the server aborts them all.

pub mod auth;

use provider_api::error::chain;
use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use kube::runtime::reflector::Store;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;
use crate::leases::{ConsumerLeases, Failure};
use crate::metrics::OperatorMetrics;
use auth::{Auth, Refusal};
use fleet::consumer_lease::{LeasePath, LeaseQuery, LeaseRefusal};

/// The longest a connection is served (then it is closed).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;

/// What the endpoints read.
pub struct HttpState {
    /// The metrics registry (provider and operator metrics).
    pub registry: Registry,
    /// The Proxy watch cache.
    pub proxies: Store<Proxy>,
    /// Set once the watch cache has synced.
    pub ready: AtomicBool,
    /// Who may read `/metrics` and `/proxies`.
    pub auth: Auth,
    /// Where auth outcomes are counted.
    pub metrics: OperatorMetrics,
    /// Consumer leases.
    pub leases: ConsumerLeases,
}

/// Serves until `cancel` fires.
pub async fn serve(listener: TcpListener, state: Arc<HttpState>, cancel: CancellationToken) {
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        if connections.len() >= MAX_CONNECTIONS {
            tokio::select! {
                () = cancel.cancelled() => break,
                _ = connections.join_next() => continue,
            }
        }
        let accepted = tokio::select! {
            () = cancel.cancelled() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %chain(&e), "http: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(route(&state, &req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Ok(Err(e)) = tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                tracing::debug!(error = %chain(&e), "http: connection error");
            }
        });
    }
    connections.shutdown().await;
}

async fn route(state: &HttpState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    if path == "/leases" || path.starts_with("/leases/") {
        return leases(state, req).await.unwrap_or_else(|refusal| {
            // The same code and header as elsewhere, with a JSON body a
            // lease client reads like every other answer of /leases.
            let mut r = refused(refusal);
            let body = LeaseRefusal {
                reason: refusal.reason().to_owned(),
                error: refusal.body().trim_end().to_owned(),
            };
            if let Ok(bytes) = serde_json::to_vec(&body) {
                *r.body_mut() = Full::new(Bytes::from(bytes));
                r.headers_mut().insert(
                    CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/json"),
                );
            }
            r
        });
    }
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if state.ready.load(Ordering::Acquire) {
                text(StatusCode::OK, "ok\n")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "watch cache not synced\n")
            }
        }
        "/metrics" => match metrics_access(state, req).await {
            Ok(()) => metrics(state),
            Err(refusal) => refused(refusal),
        },
        "/proxies" => discovery(state, req).await.unwrap_or_else(refused),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Whether the caller may read `/metrics`.
async fn metrics_access(state: &HttpState, req: &Request<Incoming>) -> Result<(), Refusal> {
    let caller = state.auth.authenticate(req.headers()).await;
    let checked = match &caller {
        Ok(caller) => state.auth.metrics(caller).await,
        Err(refusal) => Err(*refusal),
    };
    count(state, &checked, caller.as_ref().ok(), "/metrics");
    checked
}

fn metrics(state: &HttpState) -> Response<Full<Bytes>> {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => Response::builder()
            .header(
                CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "")),
        Err(e) => {
            tracing::error!(error = %chain(&e), "http: metrics encoding failed");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics encoding failed\n",
            )
        }
    }
}

/// `/proxies`: the caller is authenticated before its query is read (an
/// anonymous caller learns nothing, not even whether the query is
/// well-formed), then authorized for the namespaces it asks about.
async fn discovery(
    state: &HttpState,
    req: &Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Refusal> {
    let caller = match state.auth.authenticate(req.headers()).await {
        Ok(caller) => caller,
        Err(refusal) => {
            count(state, &Err::<(), _>(refusal), None, "/proxies");
            return Err(refusal);
        }
    };
    let query = match fleet::DiscoveryQuery::parse(req.uri().query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => {
            return Ok(json(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({ "error": e.to_string() }),
            ));
        }
    };
    let cached = state.proxies.state();
    let namespaces: BTreeSet<&str> = cached
        .iter()
        .filter_map(|p| p.metadata.namespace.as_deref())
        .collect();
    let scope = state
        .auth
        .discovery(
            &caller,
            query.namespace.as_ref().map(|n| n.as_str()),
            &namespaces,
        )
        .await;
    count(state, &scope, Some(&caller), "/proxies");
    let scope = scope?;
    let proxies = cached
        .iter()
        .filter(|p| scope.admits(p.metadata.namespace.as_deref().unwrap_or_default()))
        .map(|p| crate::leases::discovered(p));
    let response = fleet::discover(proxies, &query);
    Ok(json(StatusCode::OK, &response))
}

/// `/leases`: `POST /leases?namespace=NS[&ttl=S]` grants, `PUT
/// /leases/NS/PROXY/ID[?ttl=S]` renews, `DELETE` of that path releases.
/// The caller is authenticated before anything else is read, then asked
/// about the namespace; its user name binds the lease (only it renews or
/// releases it).
async fn leases(
    state: &HttpState,
    req: &Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Refusal> {
    let path = req.uri().path();
    let grant = path == "/leases";
    let method = req.method();
    let served = if grant {
        method == Method::POST
    } else {
        method == Method::PUT || method == Method::DELETE
    };
    if !served {
        return Ok(lease_refusal(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "POST /leases?namespace=<namespace>; PUT or DELETE /leases/<namespace>/<proxy>/<id>"
                .into(),
        ));
    }
    let caller = match state.auth.authenticate(req.headers()).await {
        Ok(caller) => caller,
        Err(refusal) => {
            count(state, &Err::<(), _>(refusal), None, "/leases");
            return Err(refusal);
        }
    };
    let query = match LeaseQuery::parse(req.uri().query().unwrap_or("")) {
        Ok(q) => q,
        Err(e) => {
            return Ok(lease_refusal(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                e.to_string(),
            ));
        }
    };
    let lease = if grant {
        None
    } else {
        match LeasePath::parse(path) {
            Some(p) if query.namespace.is_none() => Some(p),
            Some(_) => {
                return Ok(lease_refusal(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "the namespace is in the path; no namespace parameter".into(),
                ));
            }
            None => {
                return Ok(lease_refusal(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    "not a lease path: /leases/<namespace>/<proxy>/<32 hex digits>".into(),
                ));
            }
        }
    };
    let namespace = match (&lease, &query.namespace) {
        (Some(p), _) => p.namespace.clone(),
        (None, Some(ns)) => ns.as_str().to_owned(),
        (None, None) => {
            return Ok(lease_refusal(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                "namespace is required: POST /leases?namespace=<namespace>".into(),
            ));
        }
    };
    let allowed = state.auth.leasing(&caller, &namespace).await;
    count(state, &allowed, Some(&caller), "/leases");
    allowed?;
    let user = caller.name();
    let leases = &state.leases;
    let answer = match (lease, method == Method::DELETE) {
        (None, _) => leases
            .grant(&namespace, user, query.ttl)
            .await
            .map(|g| json(StatusCode::CREATED, &g)),
        (Some(p), false) => leases
            .renew(&p, user, query.ttl)
            .await
            .map(|g| json(StatusCode::OK, &g)),
        (Some(p), true) => leases.release(&p, user).await.map(|()| {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NO_CONTENT;
            r
        }),
    };
    Ok(answer.unwrap_or_else(|failure| match failure {
        Failure::NoneFree { healthy } => lease_refusal(
            StatusCode::CONFLICT,
            "NoneFree",
            format!("no healthy proxy in {namespace} is free ({healthy} healthy, all leased); ask again later"),
        ),
        Failure::Ended(why) => lease_refusal(StatusCode::GONE, why.as_str(), why.message().into()),
        Failure::Unavailable(why) => {
            lease_refusal(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", why)
        }
    }))
}

fn lease_refusal(code: StatusCode, reason: &str, error: String) -> Response<Full<Bytes>> {
    json(
        code,
        &LeaseRefusal {
            reason: reason.to_owned(),
            error,
        },
    )
}

/// Counts an auth outcome (with auth on) and logs a refusal: who, never
/// the token.
fn count<T>(
    state: &HttpState,
    outcome: &Result<T, Refusal>,
    caller: Option<&auth::Caller>,
    path: &str,
) {
    if matches!(state.auth, Auth::Off) {
        return;
    }
    let word = match outcome {
        Ok(_) => "allowed",
        Err(refusal) => refusal.outcome(),
    };
    state.metrics.http_auth(word);
    if let Err(refusal) = outcome {
        let user = caller.map_or("-", auth::Caller::name);
        tracing::debug!(
            path,
            user,
            outcome = word,
            code = refusal.status().as_u16(),
            "http: refused"
        );
    }
}

fn refused(refusal: Refusal) -> Response<Full<Bytes>> {
    let mut r = text(refusal.status(), refusal.body());
    if refusal == Refusal::Unauthenticated {
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Bearer realm=\"egress-proxies\""),
        );
    }
    r
}

fn json(code: StatusCode, body: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_vec(body) {
        Ok(bytes) => Response::builder()
            .status(code)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(bytes)))
            .unwrap_or_else(|_| text(StatusCode::INTERNAL_SERVER_ERROR, "")),
        Err(e) => {
            tracing::error!(error = %chain(&e), "http: JSON encoding failed");
            text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n")
        }
    }
}

fn text(code: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *r.status_mut() = code;
    r
}

//! The HTTP endpoints every replica serves: `/metrics` (Prometheus text),
//! `/healthz` (the process serves), `/readyz` (the Proxy watch cache is
//! synced) and `/proxies` (discovery, from the watch cache, filtered by
//! `namespace` and `healthy`). They run for the process's life, across
//! leadership terms: readiness does not depend on leading (a follower, or a
//! replica campaigning after an outage, serves discovery correctly;
//! `operator_leader` tells who leads).
//!
//! Each connection runs in a task of a `JoinSet` the server owns, bounded
//! to [`CONNECTION_LIFETIME`]; cancelling the server aborts them all.

use provider_api::error::chain;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use kube::runtime::reflector::Store;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::crd::Proxy;

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
                async move { Ok::<_, Infallible>(route(&state, &req)) }
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

fn route(state: &HttpState, req: &Request<Incoming>) -> Response<Full<Bytes>> {
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
        "/metrics" => {
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
        "/proxies" => discovery(state, req.uri().query().unwrap_or("")),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

fn discovery(state: &HttpState, query: &str) -> Response<Full<Bytes>> {
    let query = match fleet::DiscoveryQuery::parse(query) {
        Ok(q) => q,
        Err(e) => {
            return json(
                StatusCode::BAD_REQUEST,
                &serde_json::json!({ "error": e.to_string() }),
            );
        }
    };
    let proxies = state.proxies.state().into_iter().map(|p| {
        let status = p.status.clone().unwrap_or_default();
        fleet::DiscoveredProxy::new(
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default(),
            &p.spec.inner,
            &status,
        )
    });
    let response = fleet::discover(proxies, &query);
    json(StatusCode::OK, &response)
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

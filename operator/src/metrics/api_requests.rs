//! [`CountApiRequests`]: a tower layer in the kube client's stack counting
//! every Kubernetes API request by verb and answer
//! (`operator_api_requests_total{verb, code}`): `GET`, `LIST`-style reads
//! are `GET`, a watch is `WATCH`; the code is the HTTP status, or `error`
//! when no answer came (connection refused, reset, timed out).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::{Layer, Service};

use super::OperatorMetrics;

/// The layer (give it to `ClientBuilder::with_layer`).
#[derive(Clone, Debug)]
pub struct CountApiRequests(pub OperatorMetrics);

impl<S> Layer<S> for CountApiRequests {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// The service the layer makes.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    metrics: OperatorMetrics,
}

/// The request's verb: its method, or `WATCH` for a watch.
pub(super) fn verb<B>(req: &Request<B>) -> &'static str {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    if watch {
        return "WATCH";
    }
    match *req.method() {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

impl<S, B, RB> Service<Request<B>> for Counted<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let verb = verb(&req);
        let metrics = self.metrics.clone();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let r = answer.await;
            let code = match &r {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "error".to_owned(),
            };
            metrics.api_request(verb, code);
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, uri: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn verbs_name_watches_apart() {
        assert_eq!(verb(&req("GET", "/api/v1/namespaces/a/pods")), "GET");
        assert_eq!(
            verb(&req(
                "GET",
                "/apis/egress-proxies.io/v1alpha1/proxies?watch=true&timeoutSeconds=290"
            )),
            "WATCH"
        );
        assert_eq!(verb(&req("GET", "/api?watchers=true")), "GET");
        assert_eq!(verb(&req("PATCH", "/apis/x/v1/y/z/status")), "PATCH");
        assert_eq!(verb(&req("OPTIONS", "/")), "OTHER");
    }

    #[tokio::test]
    async fn each_answer_is_counted_by_verb_and_code() {
        let m = OperatorMetrics::default();
        let mut svc =
            CountApiRequests(m.clone()).layer(tower::service_fn(|r: Request<()>| async move {
                if r.uri().path() == "/down" {
                    return Err("refused");
                }
                Ok::<_, &str>(Response::builder().status(404).body(()).unwrap_or_default())
            }));
        let _ = svc.call(req("GET", "/gone")).await;
        let _ = svc.call(req("GET", "/gone")).await;
        let _ = svc.call(req("POST", "/down")).await;
        assert_eq!(m.api_requests_of("GET", "404"), 2);
        assert_eq!(m.api_requests_of("POST", "error"), 1);
        assert_eq!(m.api_requests_of("POST", "201"), 0);
    }
}

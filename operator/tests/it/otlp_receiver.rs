//! An OTLP/HTTP collector of the tests' own (hyper on 127.0.0.1): it
//! records every request body, and decodes them with `protoc` and
//! OpenTelemetry's official `.proto` files (Debian's), so what the
//! operator sends is read by the specification's own definitions, not by
//! our encoder's mirror image.

use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use testkit::otlp::protoc_text;
use tokio::task::JoinHandle;

/// Every request received: its path and body.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// The collector; stops on drop.
pub struct OtlpReceiver {
    /// Its port.
    pub port: u16,
    bodies: Received,
    task: JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A span as protoc decoded it.
#[derive(Debug, Clone, Default)]
pub struct DecodedSpan {
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: Option<String>,
    pub name: String,
    /// `key = value` of its string, int and bool attributes.
    pub attributes: Vec<(String, String)>,
}

impl OtlpReceiver {
    /// Listens on a free port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies: Received = Arc::default();
        let sink = Arc::clone(&bodies);
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let sink = Arc::clone(&sink);
                conns.spawn(async move {
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let sink = Arc::clone(&sink);
                        async move {
                            let path = req.uri().path().to_owned();
                            let body = req.into_body().collect().await?.to_bytes().to_vec();
                            sink.lock().unwrap().push((path, body));
                            Ok::<_, hyper::Error>(hyper::Response::new(http_body_util::Full::new(
                                bytes::Bytes::new(),
                            )))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { port, bodies, task }
    }

    /// The request paths received so far.
    pub fn paths(&self) -> Vec<String> {
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Every request so far as protoc's text format.
    pub fn decoded(&self) -> Vec<String> {
        let bodies: Vec<Vec<u8>> = self
            .bodies
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect();
        bodies.iter().map(|b| protoc_text(b)).collect()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<DecodedSpan> {
        self.decoded().iter().flat_map(|t| spans_of(t)).collect()
    }
}

/// The spans of one decoded request (protoc's text format is indented by
/// two spaces per level; a span's own fields sit one level inside it).
fn spans_of(text: &str) -> Vec<DecodedSpan> {
    let mut spans = Vec::new();
    let mut current: Option<(usize, DecodedSpan)> = None;
    let mut key: Option<String> = None;
    for line in text.lines() {
        let depth = (line.len() - line.trim_start().len()) / 2;
        let l = line.trim();
        if l == "spans {" {
            current = Some((depth, DecodedSpan::default()));
            continue;
        }
        let Some((d, span)) = current.as_mut() else {
            continue;
        };
        if l == "}" && depth == *d {
            if let Some((_, s)) = current.take() {
                spans.push(s);
            }
            continue;
        }
        let unquote = |v: &str| v.trim().trim_matches('"').to_owned();
        if depth == *d + 1 {
            match l.split_once(':') {
                Some(("trace_id", v)) => span.trace_id = unquote(v),
                Some(("span_id", v)) => span.span_id = unquote(v),
                Some(("parent_span_id", v)) => span.parent_span_id = Some(unquote(v)),
                Some(("name", v)) => span.name = unquote(v),
                _ => {}
            }
        } else if let Some((k, v)) = l.split_once(": ") {
            match k {
                "key" => key = Some(unquote(v)),
                "string_value" | "int_value" | "bool_value" | "double_value" => {
                    if let Some(k) = key.take() {
                        span.attributes.push((k, unquote(v)));
                    }
                }
                _ => {}
            }
        }
    }
    spans
}

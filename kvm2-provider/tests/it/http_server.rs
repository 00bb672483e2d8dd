//! A tiny HTTP/1.1 server on 127.0.0.1 that a test starts and owns, with
//! scripted replies (full, chunked, cut short, stalled, redirects, errors)
//! and a request counter.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use provider_api::config::values::{HttpUrl, Sha256Digest};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use url::Url;

/// What the server answers for a path.
#[derive(Clone)]
pub enum Reply {
    /// The body, with or without a Content-Length (without: close-delimited).
    Body { body: Arc<Vec<u8>>, length: bool },
    /// Chunked transfer encoding, complete.
    Chunked(Arc<Vec<u8>>),
    /// Declares `body.len()` but sends only `send` bytes, then closes.
    Truncated { body: Arc<Vec<u8>>, send: usize },
    /// Chunked, sends `send` bytes, then closes without the last chunk.
    ChunkedDies { body: Arc<Vec<u8>>, send: usize },
    /// Sends headers and `send` bytes of a declared body, then stalls.
    Stalls { body: Arc<Vec<u8>>, send: usize },
    /// 302 to the location.
    Redirect(String),
    /// An error status with an empty body.
    Status(u16),
}

/// A server task and its connections, all aborted on drop.
pub struct Server {
    base: Url,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Aborting the accept loop drops its JoinSet, which aborts every
        // connection task.
        self.task.abort();
    }
}

impl Server {
    pub async fn start(route: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = Url::parse(&format!("http://{}/", listener.local_addr().unwrap())).unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let route = Arc::new(route);
        let counter = hits.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let (route, counter) = (route.clone(), counter.clone());
                connections.spawn(async move {
                    let _ = serve(socket, &*route, &counter).await;
                });
                // Reap finished connections so the set stays small.
                while connections.try_join_next().is_some() {}
            }
        });
        Server { base, hits, task }
    }

    pub fn url(&self, path: &str) -> HttpUrl {
        HttpUrl::parse(self.base.join(path).unwrap().as_str()).unwrap()
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn serve(
    mut socket: TcpStream,
    route: &(dyn Fn(&str) -> Reply + Send + Sync),
    hits: &AtomicUsize,
) -> std::io::Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = socket.read(&mut buf).await?;
        if n == 0 || request.len() > 16 * 1024 {
            return Ok(());
        }
        request.extend_from_slice(&buf[..n]);
    }
    hits.fetch_add(1, Ordering::SeqCst);
    let text = String::from_utf8_lossy(&request);
    let path = text.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let head = |status: &str, extra: &str| {
        format!("HTTP/1.1 {status}\r\nConnection: close\r\n{extra}\r\n").into_bytes()
    };
    match route(&path) {
        Reply::Body { body, length } => {
            let extra = if length {
                format!("Content-Length: {}\r\n", body.len())
            } else {
                String::new()
            };
            socket.write_all(&head("200 OK", &extra)).await?;
            for chunk in body.chunks(64 * 1024) {
                socket.write_all(chunk).await?;
            }
        }
        Reply::Chunked(body) => {
            socket
                .write_all(&head("200 OK", "Transfer-Encoding: chunked\r\n"))
                .await?;
            for chunk in body.chunks(10_000) {
                socket
                    .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                    .await?;
                socket.write_all(chunk).await?;
                socket.write_all(b"\r\n").await?;
            }
            socket.write_all(b"0\r\n\r\n").await?;
        }
        Reply::Truncated { body, send } => {
            let extra = format!("Content-Length: {}\r\n", body.len());
            socket.write_all(&head("200 OK", &extra)).await?;
            socket.write_all(&body[..send]).await?;
        }
        Reply::ChunkedDies { body, send } => {
            socket
                .write_all(&head("200 OK", "Transfer-Encoding: chunked\r\n"))
                .await?;
            socket
                .write_all(format!("{:x}\r\n", body.len()).as_bytes())
                .await?;
            socket.write_all(&body[..send]).await?;
        }
        Reply::Stalls { body, send } => {
            let extra = format!("Content-Length: {}\r\n", body.len());
            socket.write_all(&head("200 OK", &extra)).await?;
            socket.write_all(&body[..send]).await?;
            socket.flush().await?;
            // Hold the connection open; the test's deadline must end it.
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
        Reply::Redirect(location) => {
            let extra = format!("Location: {location}\r\nContent-Length: 0\r\n");
            socket.write_all(&head("302 Found", &extra)).await?;
        }
        Reply::Status(code) => {
            let status = format!("{code} Whatever");
            socket
                .write_all(&head(&status, "Content-Length: 0\r\n"))
                .await?;
        }
    }
    socket.shutdown().await
}

/// `len` deterministic bytes that do not compress: an image body.
pub fn image(len: usize) -> Arc<Vec<u8>> {
    Arc::new(testkit::bytes::pseudo_random(len, 0x1234_5678))
}

/// An empty qcow2 image of `virtual_size` (`64M`, `3G`...) to serve.
pub fn qcow2_image(virtual_size: &str) -> Arc<Vec<u8>> {
    Arc::new(testkit::qemu_img::qcow2_bytes(virtual_size))
}

/// A server answering every path with `body` and its Content-Length.
pub async fn serve_body(body: &Arc<Vec<u8>>) -> Server {
    let b = body.clone();
    Server::start(move |_| Reply::Body {
        body: b.clone(),
        length: true,
    })
    .await
}

pub fn digest(bytes: &[u8]) -> Sha256Digest {
    Sha256Digest::from_bytes(Sha256::digest(bytes).into())
}

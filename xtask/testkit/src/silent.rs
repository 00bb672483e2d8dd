//! A TCP listener that accepts and never answers: a host whose port is open
//! but whose service hangs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// Accepts on 127.0.0.1, answers nothing, counts connections accepted and
/// those still open (a peer that closed is noticed by a read returning 0).
/// Dropping it closes every connection.
pub struct Silent {
    port: u16,
    accepted: Arc<AtomicUsize>,
    open: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Silent {
    /// Starts listening on 127.0.0.1.
    pub async fn start() -> Self {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST.into()).await
    }

    /// Starts listening on `ip` (an address of this machine).
    pub async fn start_on(ip: std::net::IpAddr) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let open = Arc::new(AtomicUsize::new(0));
        let (a, o) = (accepted.clone(), open.clone());
        let task = tokio::spawn(async move {
            let mut held = JoinSet::new();
            while let Ok((mut socket, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let o = o.clone();
                o.fetch_add(1, Ordering::SeqCst);
                held.spawn(async move {
                    let mut buf = [0u8; 1024];
                    while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {}
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Silent {
            port,
            accepted,
            open,
            task,
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections the peer has not closed yet.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Waits (up to 10 s) until every peer closed; false when some did not.
    pub async fn drained(&self) -> bool {
        crate::wait::zero(&self.open).await
    }
}

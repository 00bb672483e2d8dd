//! A relay between a client and the sandbox daemon that can freeze the link
//! (stop forwarding in both directions, keep both sockets open: no RST, no
//! FIN) or cut it (close both sockets).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::task::JoinHandle;

pub struct Relay {
    frozen: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Returns the client's end of the relay to `socket`.
    pub async fn start(socket: &Path) -> (UnixStream, Relay) {
        let (client_end, relay_end) = UnixStream::pair().unwrap();
        let daemon = UnixStream::connect(socket).await.unwrap();
        let frozen = Arc::new(AtomicBool::new(false));
        let (cr, cw) = relay_end.into_split();
        let (dr, dw) = daemon.into_split();
        let tasks = vec![
            tokio::spawn(pump(cr, dw, frozen.clone())),
            tokio::spawn(pump(dr, cw, frozen.clone())),
        ];
        (client_end, Relay { frozen, tasks })
    }

    /// Stops forwarding; both sockets stay open.
    pub fn freeze(&self) {
        self.frozen.store(true, Ordering::SeqCst);
    }

    /// Closes both sockets.
    pub fn cut(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.cut();
    }
}

async fn pump(
    mut from: tokio::net::unix::OwnedReadHalf,
    mut to: tokio::net::unix::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            // Hold both halves open, forward nothing, until aborted.
            std::future::pending::<()>().await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

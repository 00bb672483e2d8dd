//! Probing from another network namespace (`--probe-netns`): where the
//! proxies' addresses are reachable only inside a named namespace (the
//! sandbox's guest network, a host whose VMs sit on an isolated bridge),
//! each probe's TCP connection is opened there while the operator itself
//! stays in its own namespace (API server, SSH to hosts).
//!
//! A socket belongs to the namespace it was created in for its life, so the
//! connection is made on a short-lived thread that joined the namespace and
//! is then handed to tokio. Joining needs `CAP_SYS_ADMIN`.

use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use nix::sched::{CloneFlags, setns};
use tokio::net::TcpStream;

/// Where `ip netns add NAME` pins a namespace.
pub fn netns_path(name: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(name)
}

/// A connector into one network namespace.
#[derive(Debug, Clone)]
pub struct Netns {
    path: PathBuf,
}

impl Netns {
    /// The namespace `ip netns` calls `name`; checked to exist (and to be
    /// joinable) at once, so a wrong flag stops the health engine's start
    /// (and the operator) instead of failing every probe.
    ///
    /// # Errors
    /// When the namespace cannot be opened or joined.
    pub fn open(name: &str) -> io::Result<Self> {
        let netns = Self {
            path: netns_path(name),
        };
        netns.join_on_thread(|| Ok(()))?;
        Ok(netns)
    }

    /// Opens a TCP connection to `addr` from inside the namespace, waiting
    /// at most `timeout` (the thread ends by then whatever the caller does).
    ///
    /// # Errors
    /// As `connect` would, or when the namespace cannot be joined.
    pub async fn connect(&self, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        let this = self.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("probe-netns".into())
            .spawn(move || {
                let result = this.join_on_current(|| {
                    let s = std::net::TcpStream::connect_timeout(&addr, timeout)?;
                    s.set_nonblocking(true)?;
                    Ok(s)
                });
                // The caller may have gone (its deadline): the socket drops.
                let _ = tx.send(result);
            })?;
        let stream = rx
            .await
            .map_err(|_| io::Error::other("the namespace thread ended without a result"))??;
        TcpStream::from_std(stream)
    }

    fn join_on_thread(
        &self,
        f: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        let this = self.clone();
        std::thread::Builder::new()
            .name("probe-netns".into())
            .spawn(move || this.join_on_current(f))?
            .join()
            .map_err(|_| io::Error::other("the namespace thread panicked"))?
    }

    /// Joins the namespace on the calling thread (a thread of our own,
    /// never a tokio worker) and runs `f` there.
    fn join_on_current<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        let ns = File::open(&self.path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot open network namespace {}: {e}", self.path.display()),
            )
        })?;
        setns(&ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
            io::Error::new(
                io::Error::from(e).kind(),
                format!("cannot join network namespace {}: {e}", self.path.display()),
            )
        })?;
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_refused_with_its_path() {
        let err = Netns::open("egress-proxies-no-such-netns").unwrap_err();
        assert!(
            err.to_string()
                .contains("/run/netns/egress-proxies-no-such-netns"),
            "{err}"
        );
    }
}

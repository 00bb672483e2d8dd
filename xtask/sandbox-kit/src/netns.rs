//! Reaching into a named network namespace (`ip netns`): run a closure on a
//! thread that joined it, open a TCP connection from inside it, or build a
//! command that runs inside it.
//!
//! A socket belongs to the namespace it was created in for its whole life,
//! so a [`TcpStream`] made on a thread inside the namespace keeps talking
//! through the namespace's interfaces after that thread has ended, from any
//! thread of the calling process, blocking or (after `set_nonblocking`)
//! handed to tokio.
//!
//! Joining a network namespace needs `CAP_SYS_ADMIN` (tests run as root,
//! like the sandbox).

use std::fs::File;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use nix::sched::{CloneFlags, setns};

/// Where `ip netns add NAME` pins a namespace.
pub fn netns_path(netns: &str) -> PathBuf {
    PathBuf::from("/run/netns").join(netns)
}

/// Runs `f` on a fresh thread that has joined the network namespace `netns`
/// (`/run/netns/NAME`) and returns its result. Sockets `f` creates live in
/// that namespace; the calling thread's namespace is never changed.
///
/// Blocks until `f` returns: `f` must bound its own waits (connect and read
/// timeouts).
///
/// # Errors
/// The namespace cannot be opened or joined (it does not exist, or the
/// process lacks `CAP_SYS_ADMIN`), the thread cannot be spawned, or `f`
/// fails. A panic in `f` is returned as an error.
pub fn in_netns<T, F>(netns: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> io::Result<T> + Send + 'static,
{
    let path = netns_path(netns);
    let ns = File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot open network namespace {}: {e}", path.display()),
        )
    })?;
    let name = netns.to_owned();
    std::thread::Builder::new()
        .name(format!("netns-{netns}"))
        .spawn(move || {
            setns(&ns, CloneFlags::CLONE_NEWNET).map_err(|e| {
                io::Error::new(
                    io::Error::from(e).kind(),
                    format!("cannot join network namespace {name}: {e}"),
                )
            })?;
            f()
        })?
        .join()
        .map_err(|_| {
            io::Error::other(format!(
                "the thread inside network namespace {netns} panicked"
            ))
        })?
}

/// Opens a TCP connection to `addr` from inside the network namespace
/// `netns`, waiting at most `timeout` for it to be established.
///
/// ```no_run
/// use std::time::Duration;
/// let sandbox = sandbox_kit::Descriptor::require();
/// let net = &sandbox.guest_net;
/// let stream = sandbox_kit::connect_in(&net.netns, net.upstream, Duration::from_secs(5))?;
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// # Errors
/// As [`in_netns`], and the connect's own error (refused, unreachable,
/// timed out).
pub fn connect_in(netns: &str, addr: SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
    in_netns(netns, move || TcpStream::connect_timeout(&addr, timeout))
}

/// A command that runs `program` inside the network namespace `netns`
/// (`ip netns exec NETNS PROGRAM ...`; add arguments, environment and stdio
/// as usual). `ip` joins the namespace and execs `program`, so a spawned
/// child's pid is the program's own; like every `ip netns exec`, the program
/// sees a `/sys` that describes the namespace.
pub fn command_in(netns: &str, program: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", netns, program]);
    c
}

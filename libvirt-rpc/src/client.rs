//! The cheap, cloneable handle callers use.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::connection::{Command, Connection, Control, Handles};
use crate::domain_state::DrvFeature;
use crate::error::{DisconnectReason, Error, LibvirtError, Result};
use crate::proto::packet::{
    self, Header, MessageType, Packet, REMOTE_PROGRAM, REMOTE_VERSION, Status,
};
use crate::proto::remote_error::WireError;
use crate::proto::xdr::{self, Decode, Encode};

/// A handle to one libvirt connection. Clone it freely: every clone talks
/// through the same connection task, and any number of tasks may call at
/// once (calls are multiplexed by serial).
///
/// The connection task ends when [`Client::close`] is called, when the link
/// dies, or when the last handle (including streams and subscriptions,
/// which hold one) is dropped.
///
/// # Cancellation policy
/// Dropping a call's future (or its deadline passing) abandons that call
/// only: its reply, when it comes, is discarded, and the connection stays
/// up for everyone else. The daemon may still carry the call out — libvirt
/// has no way to cancel a call — so a caller that abandons a mutating call
/// must re-read state before relying on it. A dead link is detected by
/// keepalive, not by slow calls: a slow call (a TCG domain booting, a pool
/// refresh) says nothing about the link, and killing the link for it would
/// fail every other caller's calls and streams. Dropping a stream's future
/// aborts the stream on the wire.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    call_timeout: Duration,
}

pub(crate) struct Shared {
    pub(crate) commands: mpsc::Sender<Command>,
    pub(crate) control: mpsc::UnboundedSender<Control>,
    pub(crate) serial: Arc<AtomicU32>,
    pub(crate) dead: watch::Receiver<Option<DisconnectReason>>,
    pub(crate) config: Config,
    /// Bytes of stream data that may wait in the outgoing queue, for all
    /// streams together ([`Config::stream_buffer`]).
    stream_budget: Arc<Semaphore>,
    task: JoinHandle<()>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // The last handle is gone: nobody can use the connection any more.
        self.task.abort();
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("closed", &self.is_closed())
            .field("call_timeout", &self.call_timeout)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts the connection task over `io` without any handshake (for
    /// callers that do their own, and for tests). Most callers want
    /// [`Client::connect`].
    ///
    /// Must be called within a tokio runtime (the task is spawned on it).
    pub fn new<S>(io: S, config: Config) -> Self
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (commands_tx, commands_rx) = mpsc::channel(config.outgoing_queue);
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let (dead_tx, dead_rx) = watch::channel(None);
        let serial = Arc::new(AtomicU32::new(1));
        let handles = Handles {
            commands: commands_rx,
            control: control_rx,
            dead: dead_tx,
            serial: serial.clone(),
        };
        let task = tokio::spawn(Connection::new(io, handles, config.clone()).run());
        let call_timeout = config.call_timeout;
        Self {
            shared: Arc::new(Shared {
                commands: commands_tx,
                control: control_tx,
                serial,
                dead: dead_rx,
                stream_budget: Arc::new(Semaphore::new(config.stream_buffer)),
                config,
                task,
            }),
            call_timeout,
        }
    }

    /// Connects: starts the connection task, then runs libvirt's handshake —
    /// authentication (NONE, or polkit: see [`crate::AuthType`]), keepalive
    /// feature probe (our own PINGs start when the daemon speaks it) and
    /// connect-open of `uri` (`qemu:///system`, `test:///default`, ...).
    ///
    /// # Errors
    /// [`Error::UnsupportedAuth`] when the daemon requires SASL;
    /// [`Error::AuthRefused`] when polkit says no;
    /// [`Error::Libvirt`] when the open fails; [`Error::Disconnected`] or
    /// [`Error::Timeout`] when the link fails during the handshake.
    ///
    /// # Cancel safety
    /// Dropping the future drops the half-made client, which ends the
    /// connection task.
    pub async fn connect<S>(
        io: S,
        uri: &str,
        flags: crate::flags::OpenFlags,
        config: Config,
    ) -> Result<Self>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let client = Self::new(io, config);
        client.handshake(uri, flags).await?;
        Ok(client)
    }

    /// [`Client::connect`] over a unix socket at `path` (e.g. libvirtd's
    /// `/run/libvirt/libvirt-sock`), with the socket's send buffer raised to
    /// [`Config::unix_send_buffer`] so that whole upload packets fit in it
    /// (see there for why). Callers that open the socket themselves and
    /// upload through it may want to do the same.
    ///
    /// # Errors
    /// [`Error::LocalSocket`] (not transient; its message names the path
    /// and what to check) when the socket does not exist, nothing listens
    /// on it, or this user may not open it; [`Error::Disconnected`]
    /// carrying the IO error for any other failure to reach it; otherwise
    /// as [`Client::connect`].
    ///
    /// # Cancel safety
    /// As [`Client::connect`].
    pub async fn connect_unix(
        path: impl AsRef<std::path::Path>,
        uri: &str,
        flags: crate::flags::OpenFlags,
        config: Config,
    ) -> Result<Self> {
        let path = path.as_ref();
        let io = tokio::net::UnixStream::connect(path).await.map_err(|e| {
            match crate::error::SocketProblem::of(&e) {
                Some(problem) => Error::LocalSocket {
                    path: path.to_owned(),
                    problem,
                    source: Arc::new(e),
                },
                None => Error::Disconnected(DisconnectReason::Io(Arc::new(e))),
            }
        })?;
        raise_send_buffer(&io, config.unix_send_buffer);
        Self::connect(io, uri, flags, config).await
    }

    /// [`Client::connect`] over plain TCP to `addr` (libvirtd's
    /// `listen_tcp`, port 16509 by default; [`crate::Uri::port_or_default`]
    /// gives it for a `+tcp` URI), with `TCP_NODELAY` set: the connection
    /// task coalesces its writes itself. Unencrypted, and the daemon sees
    /// no credentials: only for trusted networks, or daemons with SASL
    /// (which this crate does not speak, so they answer
    /// [`Error::UnsupportedAuth`]).
    ///
    /// The TCP connect is bounded by [`Config::call_timeout`], like each
    /// handshake call after it.
    ///
    /// # Errors
    /// [`Error::Disconnected`] carrying the IO error when no address of
    /// `addr` accepts the connection in time (`io::ErrorKind::TimedOut`
    /// when the deadline passed); otherwise as [`Client::connect`].
    ///
    /// # Cancel safety
    /// As [`Client::connect`]; dropping the future during the TCP connect
    /// drops the half-open socket.
    pub async fn connect_tcp(
        addr: impl tokio::net::ToSocketAddrs,
        uri: &str,
        flags: crate::flags::OpenFlags,
        config: Config,
    ) -> Result<Self> {
        let io = tcp_connect(addr, config.call_timeout).await?;
        Self::connect(io, uri, flags, config).await
    }

    /// (Feature `tls`.) [`Client::connect`] over TLS to `addr` (libvirtd's
    /// `listen_tls`, port 16514 by default): TCP as in
    /// [`Client::connect_tcp`], then [`TlsCredentials::handshake`] with the
    /// daemon known as `server_name` (the host name or IP address its
    /// certificate names, usually the URI's host), which also reads the
    /// daemon's confirmation byte. The TCP connect, the handshake and the
    /// wait for the confirmation are each bounded by
    /// [`Config::call_timeout`], like each handshake call after them.
    ///
    /// ```no_run
    /// use libvirt_rpc::{Client, Config, OpenFlags, PkiPaths, TlsCredentials};
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// // /etc/pki/CA/cacert.pem, /etc/pki/libvirt/clientcert.pem, ... (or ~/.pki/libvirt/)
    /// let tls = TlsCredentials::from_files(&PkiPaths::for_uri(&"qemu+tls://host/system".parse()?))?;
    /// let client = Client::connect_tls(
    ///     ("host.example.org", 16514),
    ///     "host.example.org",
    ///     &tls,
    ///     "qemu:///system",
    ///     OpenFlags::empty(),
    ///     Config::default(),
    /// )
    /// .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::Disconnected`] when no address of `addr` accepts the TCP
    /// connection in time; the TLS errors of [`TlsCredentials::handshake`]
    /// ([`Error::TlsServerCertificate`], [`Error::TlsRefused`],
    /// [`Error::TlsHandshake`], [`Error::TlsTimeout`], ...); otherwise as
    /// [`Client::connect`].
    ///
    /// # Cancel safety
    /// As [`Client::connect`]; dropping the future before the handshake
    /// ends drops the socket.
    ///
    /// [`TlsCredentials::handshake`]: crate::TlsCredentials::handshake
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub async fn connect_tls(
        addr: impl tokio::net::ToSocketAddrs,
        server_name: &str,
        tls: &crate::tls::TlsCredentials,
        uri: &str,
        flags: crate::flags::OpenFlags,
        config: Config,
    ) -> Result<Self> {
        let tcp = tcp_connect(addr, config.call_timeout).await?;
        let io = tls.handshake(tcp, server_name, config.call_timeout).await?;
        Self::connect(io, uri, flags, config).await
    }

    async fn handshake(&self, uri: &str, flags: crate::flags::OpenFlags) -> Result<()> {
        crate::auth::authenticate(self).await?;
        if self
            .connect_supports_feature(DrvFeature::ProgramKeepalive)
            .await?
        {
            let _ = self.shared.control.send(Control::EnableKeepalive);
        }
        self.connect_open(Some(uri), flags).await
    }

    /// A handle to the same connection whose calls use `timeout` as their
    /// deadline.
    pub fn with_call_timeout(&self, timeout: Duration) -> Self {
        Self {
            shared: self.shared.clone(),
            call_timeout: timeout,
        }
    }

    /// The connection's configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// True once the connection is dead; every call now fails with
    /// [`Error::Disconnected`].
    pub fn is_closed(&self) -> bool {
        self.shared.dead.borrow().is_some()
    }

    /// Why the connection died, if it did.
    pub fn disconnect_reason(&self) -> Option<DisconnectReason> {
        self.shared.dead.borrow().clone()
    }

    /// Resolves when the connection dies, with the reason (so a pool can
    /// redial).
    ///
    /// # Errors
    /// None: the reason is the value.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches.
    pub async fn closed(&self) -> DisconnectReason {
        let mut rx = self.shared.dead.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(r) => r.clone().unwrap_or(DisconnectReason::Closed),
            Err(_) => DisconnectReason::Closed,
        }
    }

    /// Closes the connection: every pending call, stream and subscription
    /// fails with [`Error::Disconnected`] carrying
    /// [`DisconnectReason::Closed`]. Returns once the connection task has
    /// stopped; it does not wait on the network (the socket is shut down
    /// with a 100 ms bound).
    ///
    /// # Errors
    /// None: closing cannot fail.
    ///
    /// # Cancel safety
    /// Cancel safe: the close request is sent before the first await.
    pub async fn close(&self) {
        let _ = self.shared.control.send(Control::Close);
        self.closed().await;
    }

    pub(crate) fn next_serial(&self) -> u32 {
        self.shared.serial.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn control(&self, c: Control) {
        let _ = self.shared.control.send(c);
    }

    pub(crate) fn disconnected(&self) -> Error {
        Error::Disconnected(self.disconnect_reason().unwrap_or(DisconnectReason::Closed))
    }

    /// Waits until `bytes` of stream data may be queued (capped at the whole
    /// budget, so a packet bigger than the budget waits for all of it).
    pub(crate) async fn stream_budget(&self, bytes: usize) -> Result<OwnedSemaphorePermit> {
        let want = bytes.clamp(1, self.shared.config.stream_buffer);
        let want = u32::try_from(want).unwrap_or(u32::MAX);
        self.shared
            .stream_budget
            .clone()
            .acquire_many_owned(want)
            .await
            .map_err(|_| self.disconnected())
    }

    pub(crate) fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    pub(crate) async fn submit(&self, c: Command) -> Result<()> {
        self.shared
            .commands
            .send(c)
            .await
            .map_err(|_| self.disconnected())
    }

    /// Calls any procedure of the remote program with caller-supplied
    /// argument and result types (use `()` for void).
    ///
    /// # Errors
    /// [`Error::Libvirt`] when the daemon fails the call,
    /// [`Error::Disconnected`] when the link dies first, [`Error::Timeout`]
    /// after the handle's call deadline, [`Error::Encode`]/[`Error::Decode`]
    /// when the types do not fit the procedure.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the call (see [`Client`]); the
    /// connection stays up.
    pub async fn call<A, R>(&self, procedure: i32, args: &A) -> Result<R>
    where
        A: Encode + ?Sized,
        R: Decode,
    {
        self.call_program(REMOTE_PROGRAM, REMOTE_VERSION, procedure, args)
            .await
    }

    /// Like [`Client::call`] for any program (e.g. the QEMU program
    /// `0x20008087`).
    ///
    /// # Errors
    /// As [`Client::call`].
    ///
    /// # Cancel safety
    /// As [`Client::call`].
    pub async fn call_program<A, R>(
        &self,
        program: u32,
        version: u32,
        procedure: i32,
        args: &A,
    ) -> Result<R>
    where
        A: Encode + ?Sized,
        R: Decode,
    {
        let serial = self.next_serial();
        let header = Header {
            program,
            version,
            procedure,
            kind: MessageType::Call,
            serial,
            status: Status::Ok,
        };
        let packet = packet::encode_packet(&header, args)
            .map_err(|source| Error::Encode { procedure, source })?;
        let reply = self.call_packet(serial, procedure, packet).await?;
        decode_reply(procedure, &reply)
    }

    async fn call_packet(&self, serial: u32, procedure: i32, packet: Bytes) -> Result<Packet> {
        let (tx, rx) = oneshot::channel();
        let after = self.call_timeout;
        let work = async {
            self.submit(Command::Call {
                serial,
                packet,
                reply: tx,
            })
            .await?;
            // Abandoned from here on (deadline, or the caller dropped this
            // future): the connection forgets the call, so a reply that
            // never comes holds nothing.
            let mut pending = PendingCall {
                client: self,
                serial,
                answered: false,
            };
            let reply = rx.await.map_err(|_| self.disconnected());
            pending.answered = true;
            reply
        };
        tokio::time::timeout(after, work)
            .await
            .map_err(|_| Error::Timeout { procedure, after })?
    }
}

/// A TCP connection to `addr` within `timeout`, `TCP_NODELAY` set (the
/// connection task coalesces its writes itself).
async fn tcp_connect(
    addr: impl tokio::net::ToSocketAddrs,
    timeout: Duration,
) -> Result<tokio::net::TcpStream> {
    let io_error = |e| Error::Disconnected(DisconnectReason::Io(Arc::new(e)));
    let io = tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| {
            io_error(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("TCP connect took longer than {timeout:?}"),
            ))
        })?
        .map_err(io_error)?;
    // Best effort: without it calls are slower, not wrong.
    let _ = io.set_nodelay(true);
    Ok(io)
}

/// A submitted call whose reply has not been taken yet.
struct PendingCall<'a> {
    client: &'a Client,
    serial: u32,
    answered: bool,
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.client.control(Control::ForgetCall(self.serial));
        }
    }
}

/// Turns a REPLY into the result type or the daemon's error.
pub(crate) fn decode_reply<R: Decode>(procedure: i32, p: &Packet) -> Result<R> {
    match p.header.status {
        Status::Ok => {
            xdr::from_bytes(&p.payload).map_err(|source| Error::Decode { procedure, source })
        }
        Status::Error => Err(daemon_error(procedure, p)),
        Status::Continue => Err(Error::Protocol(format!(
            "procedure {procedure}: CONTINUE status on a reply"
        ))),
    }
}

/// Decodes the error payload of an ERROR packet.
pub(crate) fn daemon_error(procedure: i32, p: &Packet) -> Error {
    match xdr::from_bytes::<WireError>(&p.payload) {
        Ok(e) => Error::Libvirt(LibvirtError::from(e)),
        Err(source) => Error::Decode { procedure, source },
    }
}

/// Raises `io`'s send buffer to `bytes` (0: leave the system default). Best
/// effort: the kernel caps it at `net.core.wmem_max`, and a smaller buffer
/// only costs daemon CPU, not correctness.
fn raise_send_buffer(io: &tokio::net::UnixStream, bytes: usize) {
    if bytes > 0 {
        let _ = socket2::SockRef::from(io).set_send_buffer_size(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wmem_max() -> usize {
        std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(usize::MAX)
    }

    /// A socket that is not there, or that nothing listens on, is its own
    /// error naming the path and what to check, and not transient (a
    /// retry loop would never end).
    #[tokio::test]
    async fn a_missing_or_dead_socket_is_its_own_lasting_error() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("libvirt-sock");
        let flags = crate::flags::OpenFlags::empty();
        let e = Client::connect_unix(&missing, "qemu:///system", flags, Config::default())
            .await
            .err()
            .unwrap();
        assert!(!e.is_transient(), "{e}");
        let text = e.to_string();
        assert!(text.contains(&missing.display().to_string()), "{text}");
        assert!(text.contains("is libvirtd"), "{text}");
        assert!(matches!(
            e,
            Error::LocalSocket {
                problem: crate::error::SocketProblem::Missing,
                ..
            }
        ));

        // The file of a daemon that died: bound, then its listener gone.
        let dead = dir.path().join("dead-sock");
        drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
        let e = Client::connect_unix(&dead, "qemu:///system", flags, Config::default())
            .await
            .err()
            .unwrap();
        assert!(!e.is_transient(), "{e}");
        assert!(
            matches!(
                e,
                Error::LocalSocket {
                    problem: crate::error::SocketProblem::Refused,
                    ..
                }
            ),
            "{e}"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            crate::error::SocketProblem::of(&denied),
            Some(crate::error::SocketProblem::Denied)
        );
        let other = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(crate::error::SocketProblem::of(&other), None);
    }

    #[tokio::test]
    async fn the_configured_send_buffer_is_applied() {
        let (a, _b) = tokio::net::UnixStream::pair().unwrap();
        let want = Config::default().unix_send_buffer;
        raise_send_buffer(&a, want);
        // Linux doubles the request for its bookkeeping, capped at wmem_max.
        let got = socket2::SockRef::from(&a).send_buffer_size().unwrap();
        assert!(got >= 2 * want.min(wmem_max()), "send buffer {got}");

        let (c, _d) = tokio::net::UnixStream::pair().unwrap();
        let before = socket2::SockRef::from(&c).send_buffer_size().unwrap();
        raise_send_buffer(&c, 0);
        assert_eq!(
            socket2::SockRef::from(&c).send_buffer_size().unwrap(),
            before
        );
    }
}

//! Shared state of one connection: whether it is still usable, why not, and
//! whether its teardown has finished. [`Closer`] is the public handle on it.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::sync::CancellationToken;

use crate::error::Error;

/// The state shared by a socket, its tasks and its [`Closer`]s.
#[derive(Debug, Default)]
pub(crate) struct Link {
    /// Cancelled when the socket becomes unusable, for whatever reason.
    /// Every blocked reader and writer watches it.
    dead: CancellationToken,
    /// Cancelled when the russh session task has ended (its handler was
    /// dropped).
    session_ended: CancellationToken,
    /// Cancelled when the supervisor has finished the teardown.
    torn_down: CancellationToken,
    /// Why the link died: the first reason wins.
    reason: Mutex<Option<Reason>>,
    /// The last thing russh said before the session ended.
    session_detail: Mutex<Option<String>>,
}

/// Why a link died (a cheap, clonable mirror of the [`Error`] variants).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reason {
    Closed,
    PeerSilent(std::time::Duration),
    SessionEnded,
}

impl Link {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Marks the link dead (first reason wins) and wakes every waiter.
    pub(crate) fn fail(&self, reason: Reason) {
        {
            let mut slot = self.reason.lock().unwrap_or_else(PoisonError::into_inner);
            slot.get_or_insert(reason);
        }
        self.dead.cancel();
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.is_cancelled()
    }

    pub(crate) fn dead_token(&self) -> &CancellationToken {
        &self.dead
    }

    pub(crate) fn session_ended_token(&self) -> &CancellationToken {
        &self.session_ended
    }

    pub(crate) fn torn_down_token(&self) -> &CancellationToken {
        &self.torn_down
    }

    pub(crate) fn reason(&self) -> Option<Reason> {
        self.reason
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records what russh reported as the session's end.
    pub(crate) fn set_session_detail(&self, detail: String) {
        let mut slot = self
            .session_detail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(detail);
    }

    /// The error describing why the link is dead (or `Closed` if it is
    /// not dead yet, which callers do not ask).
    pub(crate) fn error(&self) -> Error {
        match self.reason() {
            None | Some(Reason::Closed) => Error::Closed,
            Some(Reason::PeerSilent(silent_for)) => Error::PeerSilent { silent_for },
            Some(Reason::SessionEnded) => Error::SessionEnded {
                detail: self
                    .session_detail
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .unwrap_or_else(|| "connection closed".to_owned()),
            },
        }
    }

    /// The `io::Error` a read or write returns once the link is dead.
    pub(crate) fn io_error(&self) -> io::Error {
        let kind = match self.reason() {
            None | Some(Reason::Closed) => io::ErrorKind::NotConnected,
            Some(Reason::PeerSilent(_)) => io::ErrorKind::TimedOut,
            Some(Reason::SessionEnded) => io::ErrorKind::ConnectionAborted,
        };
        io::Error::new(kind, self.error())
    }
}

/// A cheap, clonable handle that closes an [`SshSocket`](crate::SshSocket)
/// from anywhere and observes its end.
///
/// Get one with [`SshSocket::closer`](crate::SshSocket::closer).
#[derive(Debug, Clone)]
pub struct Closer {
    pub(crate) link: Arc<Link>,
}

impl Closer {
    /// Closes the socket. Never blocks, never waits on the network: it
    /// returns at once, every blocked reader and writer wakes with an error
    /// ([`Error::Closed`] inside an `io::Error` of kind `NotConnected`), and
    /// the connection is torn down in the background within 500 ms: a
    /// polite SSH disconnect gets at most 250 ms, the server's TCP FIN at
    /// most 250 ms more; otherwise the TCP connection is reset.
    pub fn close(&self) {
        self.link.fail(Reason::Closed);
    }

    /// Whether the socket is unusable (closed, or the link died).
    pub fn is_closed(&self) -> bool {
        self.link.is_dead()
    }

    /// Why the socket is unusable, if it is.
    pub fn close_reason(&self) -> Option<Error> {
        self.link.is_dead().then(|| self.link.error())
    }

    /// Waits until the socket is unusable and returns why: closed locally,
    /// the server silent for the keepalive bound, or the session ended.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future changes nothing.
    pub async fn closed(&self) -> Error {
        self.link.dead_token().cancelled().await;
        self.link.error()
    }

    /// Waits until the connection is fully torn down: the SSH session task
    /// has ended and the TCP connection is closed (or reset). This happens
    /// within about 500 ms of [`closed`](Self::closed).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future changes nothing.
    pub async fn torn_down(&self) {
        self.link.torn_down_token().cancelled().await;
    }
}

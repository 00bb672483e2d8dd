//! [`Script`]: what the fake daemon answers, set up before it starts.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::DuplexStream;

use super::daemon_end::DaemonEnd;
use super::fake_daemon::{FakeDaemon, Record};
use super::reply::{Call, Reply};
use crate::auth::AuthType;
use crate::client::Client;
use crate::config::Config;
use crate::error::Result;
use crate::flags::OpenFlags;
use crate::proc_num;

/// A handler the script calls for each call of its procedure.
pub(crate) type Handler = Box<dyn FnMut(&Call) -> Reply + Send>;

/// The URI [`Script::connect`] opens.
pub const FAKE_URI: &str = "test:///default";

/// What a fake daemon answers: per procedure, a fixed [`Reply`] or a
/// function of the [`Call`]. Then [`Script::connect`] (or
/// [`Script::start`]) runs it as a [`FakeDaemon`].
///
/// Without being told, the daemon answers the handshake as libvirtd with
/// auth NONE does (`AUTH_LIST` → none, `CONNECT_SUPPORTS_FEATURE` →
/// keepalive yes, anything else no, `CONNECT_OPEN` and `CONNECT_CLOSE` →
/// OK), answers keepalive PINGs, registers event callbacks (every
/// family's: domain, storage pool, network, node device and secret
/// registrations, and those added by [`Script::event_registration`]) so
/// that [`FakeDaemon::emit`] reaches them, and fails every other call the
/// way libvirtd fails a procedure it does not know
/// ([`crate::ErrorCode::Rpc`], "unknown procedure: N"). Scripting any of
/// these procedures replaces the default.
pub struct Script {
    pub(crate) handlers: HashMap<i32, Handler>,
    pub(crate) registrations: HashMap<i32, Family>,
    pub(crate) answer_pings: bool,
}

/// An event family's registration and deregistration procedures.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Family {
    Register,
    Deregister,
}

impl std::fmt::Debug for Script {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut scripted: Vec<_> = self.handlers.keys().copied().collect();
        scripted.sort_unstable();
        f.debug_struct("Script")
            .field("scripted", &scripted)
            .field("answer_pings", &self.answer_pings)
            .finish_non_exhaustive()
    }
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

impl Script {
    /// A daemon that answers the handshake, keepalive and event
    /// registrations, and nothing else.
    pub fn new() -> Self {
        Self {
            handlers: HashMap::new(),
            registrations: HashMap::new(),
            answer_pings: true,
        }
        .event_registration(
            proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
            proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY,
        )
        .event_registration(
            proc_num::CONNECT_STORAGE_POOL_EVENT_REGISTER_ANY,
            proc_num::CONNECT_STORAGE_POOL_EVENT_DEREGISTER_ANY,
        )
        .event_registration(
            proc_num::CONNECT_NETWORK_EVENT_REGISTER_ANY,
            proc_num::CONNECT_NETWORK_EVENT_DEREGISTER_ANY,
        )
        .event_registration(
            proc_num::CONNECT_NODE_DEVICE_EVENT_REGISTER_ANY,
            proc_num::CONNECT_NODE_DEVICE_EVENT_DEREGISTER_ANY,
        )
        .event_registration(
            proc_num::CONNECT_SECRET_EVENT_REGISTER_ANY,
            proc_num::CONNECT_SECRET_EVENT_DEREGISTER_ANY,
        )
    }

    /// Answers every call of `procedure` with `reply`.
    pub fn reply(self, procedure: i32, reply: Reply) -> Self {
        self.reply_with(procedure, move |_| reply.clone())
    }

    /// Answers every call of `procedure` with what `f` returns for it (to
    /// look at the arguments, count calls, or answer differently over
    /// time).
    pub fn reply_with<F>(mut self, procedure: i32, f: F) -> Self
    where
        F: FnMut(&Call) -> Reply + Send + 'static,
    {
        self.handlers.insert(procedure, Box::new(f));
        self
    }

    /// Offers `auth` in `AUTH_LIST` (default: NONE alone). Offering only
    /// [`AuthType::Polkit`] makes the client call `AUTH_POLKIT`, which the
    /// daemon then answers OK unless scripted otherwise.
    pub fn auth(self, auth: &[AuthType]) -> Self {
        let offered: Vec<i32> = auth.iter().map(|a| a.to_i32()).collect();
        let polkit = offered.contains(&AuthType::Polkit.to_i32());
        let script = self.reply(proc_num::AUTH_LIST, Reply::ok(&offered));
        if polkit && !script.handlers.contains_key(&proc_num::AUTH_POLKIT) {
            script.reply(proc_num::AUTH_POLKIT, Reply::ok(&1i32))
        } else {
            script
        }
    }

    /// Whether keepalive PINGs get a PONG (default: yes). A daemon that
    /// stops answering lets a test watch the client's dead-link detection.
    pub fn answer_pings(mut self, answer: bool) -> Self {
        self.answer_pings = answer;
        self
    }

    /// Treats `register` and `deregister` as an event family's
    /// registration procedures (their arguments start with the event id,
    /// libvirt's `*_EVENT_REGISTER_ANY` convention): a registration is
    /// answered with a fresh callback id, remembered for
    /// [`FakeDaemon::emit`], and forgotten at its deregistration. Domain
    /// events (`CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY`) are set up
    /// already.
    pub fn event_registration(mut self, register: i32, deregister: i32) -> Self {
        self.registrations.insert(register, Family::Register);
        self.registrations.insert(deregister, Family::Deregister);
        self
    }

    /// Starts the daemon: returns the client's end of the link (for
    /// [`Client::connect`] or [`Client::new`]) and the running daemon.
    ///
    /// Must be called within a tokio runtime (the daemon is a task, owned
    /// by the returned [`FakeDaemon`]: dropping it stops the daemon).
    pub fn start(self) -> (DuplexStream, FakeDaemon) {
        let (io, end) = DaemonEnd::pair();
        let record = Arc::new(Mutex::new(Record::default()));
        (io, FakeDaemon::spawn(end, self, record))
    }

    /// Starts the daemon and connects a client to it (the whole handshake,
    /// opening [`FAKE_URI`]).
    ///
    /// # Errors
    /// As [`Client::connect`]: the handshake's own calls can be scripted
    /// to fail.
    ///
    /// # Cancel safety
    /// Dropping the future drops the client and the daemon.
    pub async fn connect(self, config: Config) -> Result<(Client, FakeDaemon)> {
        let (io, daemon) = self.start();
        let client = Client::connect(io, FAKE_URI, OpenFlags::empty(), config).await?;
        Ok((client, daemon))
    }
}

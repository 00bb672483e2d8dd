//! [`FakeDaemon`]: a running [`super::Script`], and the task that plays it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::daemon_end::{DaemonEnd, reply_header};
use super::reply::{Call, Reply};
use super::script::{Family, Script};
use crate::domain_state::{DomainEventId, DrvFeature};
use crate::error::{DisconnectReason, Error, Result};
use crate::error_code::ErrorCode;
use crate::error_domain::ErrorDomain;
use crate::events::{Event, LifecycleEvent};
use crate::proc_num;
use crate::proto::packet::{
    Header, KEEPALIVE_PING, KEEPALIVE_PONG, KEEPALIVE_PROGRAM, KEEPALIVE_VERSION, MessageType,
    Packet, Status,
};
use crate::proto::remote_error::WireError;
use crate::proto::xdr::{self, Encode, Reader};

/// libvirtd's stream packet size: downloads are sent in packets of at most
/// this many bytes.
const STREAM_PACKET: usize = 256 << 10;

/// Requests from the [`FakeDaemon`] handle to its task (bounded queue;
/// the handle waits for room).
const COMMAND_QUEUE: usize = 16;

/// A running fake daemon (from [`Script::start`] or [`Script::connect`]):
/// what it received, and what a test makes it do next — push events, send
/// raw bytes, drop the link.
///
/// It owns its task: dropping the `FakeDaemon` stops the daemon and closes
/// the link.
#[derive(Debug)]
pub struct FakeDaemon {
    record: Arc<Mutex<Record>>,
    commands: mpsc::Sender<Command>,
    task: Option<JoinHandle<()>>,
}

/// What the daemon received, shared between its task and the handle.
#[derive(Debug, Default)]
pub(crate) struct Record {
    calls: Vec<Call>,
    uploads: Vec<ReceivedUpload>,
}

/// An upload stream the fake daemon took (see [`Reply::Upload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReceivedUpload {
    /// The call that opened it (procedure and arguments).
    pub call: Call,
    /// The bytes received.
    pub data: Vec<u8>,
    /// How it ended so far.
    pub outcome: UploadOutcome,
}

/// How an upload stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UploadOutcome {
    /// Still open.
    Open,
    /// The client finished it (STREAM / OK) and the daemon confirmed.
    Finished,
    /// The client aborted it (STREAM / ERROR).
    Aborted,
    /// The daemon failed it ([`Reply::upload_failing_after`]).
    Failed,
}

enum Command {
    Emit {
        register: i32,
        event_id: i32,
        procedure: i32,
        body: Bytes,
        done: oneshot::Sender<usize>,
    },
    Write {
        bytes: Bytes,
        done: oneshot::Sender<()>,
    },
}

impl FakeDaemon {
    pub(crate) fn spawn(end: DaemonEnd, script: Script, record: Arc<Mutex<Record>>) -> Self {
        let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
        let server = Server {
            end,
            script,
            record: record.clone(),
            streams: HashMap::new(),
            registrations: Vec::new(),
            next_callback: 1,
        };
        Self {
            record,
            commands,
            task: Some(tokio::spawn(server.run(rx))),
        }
    }

    /// Every call received so far, in order (keepalive and stream packets
    /// are not calls).
    pub fn calls(&self) -> Vec<Call> {
        lock(&self.record).calls.clone()
    }

    /// The procedure numbers of [`FakeDaemon::calls`], in order.
    pub fn procedures(&self) -> Vec<i32> {
        lock(&self.record)
            .calls
            .iter()
            .map(Call::procedure)
            .collect()
    }

    /// Every upload stream opened so far, with the bytes it carried.
    pub fn uploads(&self) -> Vec<ReceivedUpload> {
        lock(&self.record).uploads.clone()
    }

    /// Sends the event message `procedure` carrying `body` (the message
    /// after its callback id) to every callback the client registered
    /// with `register` for `event_id`, as libvirtd does; returns how many
    /// got it (0 when nobody subscribed). Returns once the messages are
    /// written.
    ///
    /// # Errors
    /// [`Error::Encode`] when `body` cannot be encoded;
    /// [`Error::Disconnected`] ([`DisconnectReason::Closed`]) when the
    /// daemon has stopped.
    ///
    /// # Cancel safety
    /// If dropped, the messages may or may not be sent.
    pub async fn emit<T: Encode + ?Sized>(
        &self,
        register: i32,
        event_id: i32,
        procedure: i32,
        body: &T,
    ) -> Result<usize> {
        let body = xdr::to_bytes(body).map_err(|source| Error::Encode { procedure, source })?;
        let (done, rx) = oneshot::channel();
        self.command(Command::Emit {
            register,
            event_id,
            procedure,
            body,
            done,
        })
        .await?;
        rx.await.map_err(|_| stopped())
    }

    /// [`FakeDaemon::emit`] of a domain lifecycle event to the client's
    /// [`crate::Client::subscribe_lifecycle`] subscriptions.
    ///
    /// # Errors
    /// As [`FakeDaemon::emit`].
    ///
    /// # Cancel safety
    /// As [`FakeDaemon::emit`].
    pub async fn emit_lifecycle(&self, event: &LifecycleEvent) -> Result<usize> {
        self.emit(
            proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
            DomainEventId::Lifecycle.to_wire(),
            proc_num::DOMAIN_EVENT_CALLBACK_LIFECYCLE,
            event,
        )
        .await
    }

    /// [`FakeDaemon::emit`] of any typed event to the callbacks the client
    /// registered for its id ([`crate::Client::subscribe`],
    /// [`crate::Client::subscribe_raw`], [`crate::Client::subscribe_lifecycle`]).
    /// An [`Event::Unknown`] names no id, so it reaches nobody (0): send
    /// such a message with [`FakeDaemon::emit`].
    ///
    /// # Errors
    /// As [`FakeDaemon::emit`].
    ///
    /// # Cancel safety
    /// As [`FakeDaemon::emit`].
    pub async fn emit_event(&self, event: &Event) -> Result<usize> {
        let Some(id) = event.id() else {
            return Ok(0);
        };
        let procedure = event.procedure();
        let body = event
            .encode_body()
            .map_err(|source| Error::Encode { procedure, source })?;
        let register = id.family().register_procedure();
        self.emit(register, id.wire(), procedure, &Encoded(body))
            .await
    }

    /// Writes `bytes` to the client as they are (garbage, a truncated
    /// packet, a hand-made one). Returns once written.
    ///
    /// # Errors
    /// [`Error::Disconnected`] ([`DisconnectReason::Closed`]) when the
    /// daemon has stopped.
    ///
    /// # Cancel safety
    /// If dropped, the bytes may or may not be sent.
    pub async fn send_bytes(&self, bytes: &[u8]) -> Result<()> {
        let (done, rx) = oneshot::channel();
        self.command(Command::Write {
            bytes: Bytes::copy_from_slice(bytes),
            done,
        })
        .await?;
        rx.await.map_err(|_| stopped())
    }

    /// Stops the daemon and closes the link, as a daemon that dies does:
    /// the client sees the end of the stream
    /// ([`DisconnectReason::Eof`]). What was recorded stays readable.
    ///
    /// # Cancel safety
    /// Cancel safe: the daemon is stopped before the first await.
    pub async fn disconnect(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            // Ends at once: the task was aborted (a panic in a reply
            // function ended it already).
            let _ = task.await;
        }
    }

    /// True while the daemon runs (until [`FakeDaemon::disconnect`], a
    /// [`Reply::Disconnect`], or the client closing the link).
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    async fn command(&self, c: Command) -> Result<()> {
        self.commands.send(c).await.map_err(|_| stopped())
    }
}

impl Drop for FakeDaemon {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn stopped() -> Error {
    Error::Disconnected(DisconnectReason::Closed)
}

fn lock(record: &Mutex<Record>) -> MutexGuard<'_, Record> {
    // A reply function that panicked ended the task, not the record.
    record.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The task's state.
struct Server {
    end: DaemonEnd,
    script: Script,
    record: Arc<Mutex<Record>>,
    streams: HashMap<u32, Stream>,
    registrations: Vec<Registration>,
    next_callback: i32,
}

/// An open stream, by serial.
enum Stream {
    Upload {
        index: usize,
        fail_after: Option<(u64, Box<WireError>)>,
        received: u64,
    },
    Download,
}

/// An event callback the client registered.
struct Registration {
    register: i32,
    event_id: i32,
    callback_id: i32,
}

/// Whether the task goes on after a packet.
enum Flow {
    Continue,
    Stop,
}

impl Server {
    async fn run(mut self, mut commands: mpsc::Receiver<Command>) {
        loop {
            let flow = tokio::select! {
                p = self.end.read() => match p {
                    Ok(Some(p)) => self.packet(p).await,
                    // The client closed the link or broke the framing.
                    Ok(None) | Err(_) => Ok(Flow::Stop),
                },
                c = commands.recv() => match c {
                    Some(c) => self.command(c).await,
                    None => Ok(Flow::Stop),
                },
            };
            // A failed write means the client's end is gone.
            if !matches!(flow, Ok(Flow::Continue)) {
                break;
            }
        }
    }

    async fn command(&mut self, c: Command) -> Result<Flow> {
        match c {
            Command::Emit {
                register,
                event_id,
                procedure,
                body,
                done,
            } => {
                let ids: Vec<i32> = self
                    .registrations
                    .iter()
                    .filter(|r| r.register == register && r.event_id == event_id)
                    .map(|r| r.callback_id)
                    .collect();
                let h = Header::remote(procedure, MessageType::Message, 0, Status::Ok);
                for id in &ids {
                    let mut payload = BytesMut::with_capacity(4 + body.len());
                    payload.put_i32(*id);
                    payload.put_slice(&body);
                    self.end.send_raw(&h, &payload).await?;
                }
                let _ = done.send(ids.len());
            }
            Command::Write { bytes, done } => {
                self.end.write_bytes(&bytes).await?;
                let _ = done.send(());
            }
        }
        Ok(Flow::Continue)
    }

    async fn packet(&mut self, p: Packet) -> Result<Flow> {
        if p.header.program == KEEPALIVE_PROGRAM {
            if p.header.procedure == KEEPALIVE_PING && self.script.answer_pings {
                let pong = Header {
                    program: KEEPALIVE_PROGRAM,
                    version: KEEPALIVE_VERSION,
                    procedure: KEEPALIVE_PONG,
                    kind: MessageType::Message,
                    serial: 0,
                    status: Status::Ok,
                };
                self.end.send_raw(&pong, &[]).await?;
            }
            return Ok(Flow::Continue);
        }
        match p.header.kind {
            MessageType::Call => self.call(Call::new(p)).await,
            MessageType::Stream => self.stream(p).await.map(|()| Flow::Continue),
            // Clients send nothing else; libvirtd ignores it too.
            _ => Ok(Flow::Continue),
        }
    }

    async fn call(&mut self, call: Call) -> Result<Flow> {
        lock(&self.record).calls.push(call.clone());
        let reply = match self.script.handlers.get_mut(&call.procedure()) {
            Some(handler) => handler(&call),
            None => self.default_reply(&call),
        };
        let h = call.header();
        match reply {
            Reply::Ok(body) => {
                self.end
                    .send_raw(&reply_header(h, Status::Ok), &body)
                    .await?
            }
            Reply::Error(e) => self.end.reply_error(h, &e).await?,
            Reply::Download(data) => {
                self.end.reply(h, &()).await?;
                self.streams.insert(h.serial, Stream::Download);
                let data_header = stream_header(h, Status::Continue);
                for chunk in data.chunks(STREAM_PACKET) {
                    self.end.send_raw(&data_header, chunk).await?;
                }
                // An empty data packet: the end of the stream.
                self.end.send_raw(&data_header, &[]).await?;
            }
            Reply::Upload { fail_after } => {
                let index = {
                    let mut record = lock(&self.record);
                    record.uploads.push(ReceivedUpload {
                        call: call.clone(),
                        data: Vec::new(),
                        outcome: UploadOutcome::Open,
                    });
                    record.uploads.len() - 1
                };
                self.streams.insert(
                    h.serial,
                    Stream::Upload {
                        index,
                        fail_after: fail_after.map(|(n, e)| (n, Box::new(e))),
                        received: 0,
                    },
                );
                self.end.reply(h, &()).await?;
            }
            Reply::Silence => {}
            Reply::Disconnect => return Ok(Flow::Stop),
        }
        Ok(Flow::Continue)
    }

    /// What libvirtd with auth NONE answers when the script says nothing.
    fn default_reply(&mut self, call: &Call) -> Reply {
        let procedure = call.procedure();
        match self.script.registrations.get(&procedure) {
            Some(Family::Register) => {
                let Ok(event_id) = Reader::new(call.payload()).i32() else {
                    return bad_args(procedure);
                };
                let callback_id = self.next_callback;
                self.next_callback = self.next_callback.wrapping_add(1);
                self.registrations.push(Registration {
                    register: procedure,
                    event_id,
                    callback_id,
                });
                return Reply::ok(&callback_id);
            }
            Some(Family::Deregister) => {
                let Ok(callback_id) = Reader::new(call.payload()).i32() else {
                    return bad_args(procedure);
                };
                self.registrations.retain(|r| r.callback_id != callback_id);
                return Reply::ok(&());
            }
            None => {}
        }
        match procedure {
            proc_num::AUTH_LIST => Reply::ok(&vec![0i32]),
            proc_num::CONNECT_SUPPORTS_FEATURE => {
                let keepalive =
                    call.args::<i32>().ok() == Some(DrvFeature::ProgramKeepalive.to_wire());
                Reply::ok(&i32::from(keepalive))
            }
            proc_num::CONNECT_OPEN | proc_num::CONNECT_CLOSE => Reply::ok(&()),
            // libvirtd's own words for a procedure it does not know.
            other => Reply::error(
                ErrorCode::Rpc,
                ErrorDomain::Rpc,
                format!("unknown procedure: {other}"),
            ),
        }
    }

    async fn stream(&mut self, p: Packet) -> Result<()> {
        let serial = p.header.serial;
        // libvirtd drops stream packets for a serial with no open stream.
        let Some(stream) = self.streams.get_mut(&serial) else {
            return Ok(());
        };
        match (stream, p.header.status) {
            (
                Stream::Upload {
                    index,
                    fail_after,
                    received,
                },
                Status::Continue,
            ) => {
                *received += p.payload.len() as u64;
                set_upload(&self.record, *index, |u| {
                    u.data.extend_from_slice(&p.payload)
                });
                let failure = fail_after
                    .as_ref()
                    .filter(|(after, _)| *received >= *after)
                    .map(|(_, error)| error.as_ref().clone());
                if let Some(error) = failure {
                    set_upload(&self.record, *index, |u| u.outcome = UploadOutcome::Failed);
                    self.streams.remove(&serial);
                    self.end
                        .send(&stream_header(&p.header, Status::Error), &error)
                        .await?;
                }
            }
            // Download data from the client cannot happen; ignored.
            (Stream::Download, Status::Continue) => {}
            (stream, Status::Ok) => {
                if let Stream::Upload { index, .. } = stream {
                    set_upload(&self.record, *index, |u| {
                        u.outcome = UploadOutcome::Finished
                    });
                }
                self.streams.remove(&serial);
                self.end
                    .send_raw(&stream_header(&p.header, Status::Ok), &[])
                    .await?;
            }
            (stream, _) => {
                if let Stream::Upload { index, .. } = stream {
                    set_upload(&self.record, *index, |u| u.outcome = UploadOutcome::Aborted);
                }
                self.streams.remove(&serial);
                let answer = WireError::new(
                    ErrorCode::Rpc.to_i32(),
                    ErrorDomain::Streams.to_i32(),
                    "stream aborted at client request",
                );
                self.end
                    .send(&stream_header(&p.header, Status::Error), &answer)
                    .await?;
            }
        }
        Ok(())
    }
}

fn set_upload(record: &Mutex<Record>, index: usize, f: impl FnOnce(&mut ReceivedUpload)) {
    if let Some(u) = lock(record).uploads.get_mut(index) {
        f(u);
    }
}

/// A STREAM packet header for the stream `call` opened.
fn stream_header(call: &Header, status: Status) -> Header {
    Header {
        kind: MessageType::Stream,
        status,
        ..*call
    }
}

/// The answer to a registration whose arguments do not start with an id.
fn bad_args(procedure: i32) -> Reply {
    Reply::error(
        ErrorCode::Rpc,
        ErrorDomain::Rpc,
        format!("fake daemon: arguments of procedure {procedure} do not start with an id"),
    )
}

/// Bytes already in XDR, written as they are.
struct Encoded(Bytes);

impl Encode for Encoded {
    fn encode(&self, out: &mut BytesMut) -> Result<(), xdr::XdrError> {
        out.put_slice(&self.0);
        Ok(())
    }
}

//! The connection task: the only code that touches the socket.
//!
//! One task per connection reads packets, matches replies to callers by
//! serial, feeds stream and event queues, answers PINGs, sends its own PINGs
//! and writes what callers queued. It never awaits a consumer: replies go
//! into one-shot channels, events into bounded queues that drop on overflow,
//! and a full download queue only pauses *reading* (see `Config::stream_queue`).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot, watch};
use tokio::time::Sleep;

use crate::config::Config;
use crate::error::DisconnectReason;
use crate::events::{Family, RawEvent, Subscriber, family_of};
use crate::proto::keepalive::{Action, Keepalive};
use crate::proto::packet::{
    self, Header, KEEPALIVE_PING, KEEPALIVE_PONG, KEEPALIVE_PROGRAM, KEEPALIVE_VERSION,
    MessageType, Packet, REMOTE_PROGRAM, Status,
};
use crate::proto::remote_error::WireError;
use crate::proto::xdr::{Decode, Reader};

/// Where a reply goes.
pub(crate) type ReplyTx = oneshot::Sender<Packet>;

/// What callers ask of the connection task (bounded queue).
pub(crate) enum Command {
    /// A call whose single reply goes to `reply`.
    Call {
        serial: u32,
        packet: Bytes,
        reply: ReplyTx,
    },
    /// A call that opens a stream: its reply and every stream packet with
    /// the same serial go to `packets` until a terminal packet.
    OpenStream {
        serial: u32,
        procedure: i32,
        packet: Bytes,
        packets: mpsc::Sender<Packet>,
    },
    /// An event registration; on success the connection routes events for
    /// the returned callback id to `subscriber` before handling any later
    /// packet, so no event is lost in between.
    Subscribe {
        serial: u32,
        packet: Bytes,
        reply: ReplyTx,
        subscriber: Subscriber,
    },
    /// A packet with no reply (stream data, finish, abort); the permit, if
    /// any, holds the packet's share of the stream buffer budget until it
    /// is written.
    Send(Bytes, Option<OwnedSemaphorePermit>),
}

/// Out-of-band requests (unbounded: at most one per call, stream or
/// subscription, sent from `Drop` where waiting is impossible).
pub(crate) enum Control {
    /// A stream's owner went away before the stream ended: abort it on the
    /// wire and drop its packets. Before the daemon's REPLY has opened the
    /// stream an abort would be ignored (libvirtd drops stream packets for
    /// a serial it has not registered), so it is sent when that REPLY comes.
    AbortStream(u32),
    /// A subscription ended: stop routing its events, and deregister on the
    /// wire when its owner could not (drop).
    Unsubscribe {
        family: Family,
        callback_id: i32,
        deregister: bool,
    },
    /// A call's caller went away (deadline or drop): stop waiting for its
    /// reply (one that comes later is discarded).
    ForgetCall(u32),
    /// Start sending our own PINGs (the daemon speaks keepalive).
    EnableKeepalive,
    /// Close the connection.
    Close,
}

enum Pending {
    Call(ReplyTx),
    Stream(StreamEntry),
    Subscribe(ReplyTx, Subscriber),
}

/// A stream the daemon may be sending on.
struct StreamEntry {
    /// Where its packets go (a closed channel once aborted).
    tx: mpsc::Sender<Packet>,
    procedure: i32,
    /// The daemon's REPLY / OK arrived: the stream exists on its side.
    opened: bool,
    /// Its owner is gone: packets are dropped, and the abort is (or will be,
    /// once opened) on the wire.
    aborted: bool,
}

/// Shared between the task and its handles.
pub(crate) struct Handles {
    pub(crate) commands: mpsc::Receiver<Command>,
    pub(crate) control: mpsc::UnboundedReceiver<Control>,
    pub(crate) dead: watch::Sender<Option<DisconnectReason>>,
    pub(crate) serial: Arc<AtomicU32>,
}

/// The connection task's state.
pub(crate) struct Connection<S> {
    reader: ReadHalf<S>,
    writer: WriteHalf<S>,
    handles: Handles,
    config: Config,
    inbuf: BytesMut,
    outq: VecDeque<(Bytes, Option<OwnedSemaphorePermit>)>,
    outq_bytes: usize,
    current: Option<(Bytes, Option<OwnedSemaphorePermit>)>,
    pending: HashMap<u32, Pending>,
    /// Keyed by family and callback id: libvirtd numbers callbacks per
    /// driver, so two families may use the same id.
    subscribers: HashMap<(Family, i32), Subscriber>,
    keepalive: Option<Keepalive>,
    /// Fires at (or after) the keepalive deadline; re-armed only when it
    /// fires, so receiving packets costs no timer work.
    sleep: Pin<Box<Sleep>>,
    /// A stream packet that did not fit its consumer's queue; reading is
    /// paused until it is delivered.
    parked: Option<(mpsc::Sender<Packet>, Packet)>,
}

const READ_RESERVE: usize = 64 * 1024;
const COALESCE: usize = 64 * 1024;

impl<S: AsyncRead + AsyncWrite + Send + 'static> Connection<S> {
    pub(crate) fn new(io: S, handles: Handles, config: Config) -> Self {
        let (reader, writer) = tokio::io::split(io);
        Self {
            reader,
            writer,
            handles,
            config,
            inbuf: BytesMut::with_capacity(READ_RESERVE),
            outq: VecDeque::new(),
            outq_bytes: 0,
            current: None,
            pending: HashMap::new(),
            subscribers: HashMap::new(),
            keepalive: None,
            sleep: Box::pin(tokio::time::sleep(std::time::Duration::from_secs(3600))),
            parked: None,
        }
    }

    /// Runs until the link dies or the client closes it, then fails every
    /// waiter with the reason.
    pub(crate) async fn run(mut self) {
        let reason = self.drive().await;
        // Publish the reason before dropping the senders, so a waiter that
        // sees its channel closed can read why.
        self.handles.dead.send_replace(Some(reason));
        self.pending.clear();
        self.subscribers.clear();
        self.parked = None;
        self.handles.commands.close();
        self.handles.control.close();
        // Best effort, bounded: never wait on the network at teardown.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            self.writer.shutdown(),
        )
        .await;
    }

    async fn drive(&mut self) -> DisconnectReason {
        loop {
            if self.current.is_none() {
                self.current = self.next_write();
            }
            let can_take = self.outq_bytes < self.config.outgoing_buffer;
            let paused = self.parked.is_some();
            let ka_on = self.keepalive.is_some();
            let parked_tx = self.parked.as_ref().map(|(tx, _)| tx.clone());
            if self.inbuf.capacity() - self.inbuf.len() < 4096 {
                self.inbuf.reserve(READ_RESERVE);
            }
            tokio::select! {
                biased;
                ctl = self.handles.control.recv() => match ctl {
                    Some(Control::Close) | None => return DisconnectReason::Closed,
                    Some(c) => self.control(c),
                },
                r = async { parked_tx?.reserve_owned().await.ok() }, if paused => {
                    if let (Some(permit), Some((_, p))) = (r, self.parked.take()) {
                        permit.send(p);
                    } else {
                        self.parked = None;
                    }
                    // Frames already buffered behind the parked one.
                    if let Err(reason) = self.process_input() {
                        return reason;
                    }
                },
                r = self.reader.read_buf(&mut self.inbuf), if !paused => match r {
                    Ok(0) => return DisconnectReason::Eof,
                    Ok(_) => {
                        if let Err(reason) = self.process_input() {
                            return reason;
                        }
                    }
                    Err(e) => return DisconnectReason::Io(Arc::new(e)),
                },
                r = write_some(&mut self.writer, self.current.as_ref().map(|c| &c.0)), if self.current.is_some() => match r {
                    Ok(0) => return DisconnectReason::Io(Arc::new(std::io::ErrorKind::WriteZero.into())),
                    Ok(n) => self.advance_write(n),
                    Err(e) => return DisconnectReason::Io(Arc::new(e)),
                },
                cmd = self.handles.commands.recv(), if can_take => match cmd {
                    Some(c) => {
                        self.command(c);
                        // Take what else is queued now: one write for many calls.
                        while self.outq_bytes < self.config.outgoing_buffer {
                            match self.handles.commands.try_recv() {
                                Ok(c) => self.command(c),
                                Err(_) => break,
                            }
                        }
                    }
                    None => return DisconnectReason::Closed,
                },
                () = &mut self.sleep, if ka_on => {
                    if let Some(reason) = self.keepalive_tick() {
                        return reason;
                    }
                    self.arm_keepalive();
                }
            }
        }
    }

    fn arm_keepalive(&mut self) {
        if let Some(ka) = &self.keepalive {
            self.sleep.as_mut().reset(ka.deadline().into());
        }
    }

    /// The next bytes to write: a big packet as is, or small packets
    /// coalesced into one buffer (their budget permits are released once
    /// copied).
    fn next_write(&mut self) -> Option<(Bytes, Option<OwnedSemaphorePermit>)> {
        let first = self.outq.pop_front()?;
        if first.0.len() >= COALESCE || self.outq.front().is_none_or(|b| b.0.len() >= COALESCE) {
            return Some(first);
        }
        // Small packets (calls, PONGs, stream control) go out in one write,
        // copied into a buffer of exactly their size.
        let mut total = first.0.len();
        let mut n = 0;
        for (next, _) in &self.outq {
            if next.len() >= COALESCE || total + next.len() > COALESCE * 2 {
                break;
            }
            total += next.len();
            n += 1;
        }
        let mut merged = BytesMut::with_capacity(total);
        merged.extend_from_slice(&first.0);
        for (next, _) in self.outq.drain(..n) {
            merged.extend_from_slice(&next);
        }
        Some((merged.freeze(), None))
    }

    fn advance_write(&mut self, n: usize) {
        self.outq_bytes = self.outq_bytes.saturating_sub(n);
        if let Some((cur, _)) = &mut self.current {
            if n >= cur.len() {
                self.current = None;
            } else {
                let _ = cur.split_to(n);
            }
        }
    }

    fn queue(&mut self, b: Bytes) {
        self.queue_with(b, None);
    }

    fn queue_with(&mut self, b: Bytes, permit: Option<OwnedSemaphorePermit>) {
        self.outq_bytes += b.len();
        self.outq.push_back((b, permit));
    }

    fn queue_ping(&mut self) {
        if let Ok(p) = packet::encode_raw(&keepalive_header(KEEPALIVE_PING), &[]) {
            self.queue(p);
        }
    }

    fn queue_abort(&mut self, procedure: i32, serial: u32) {
        if let Ok(p) = abort_packet(procedure, serial, "stream cancelled by the client") {
            self.queue(p);
        }
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Call {
                serial,
                packet,
                reply,
            } => {
                self.pending.insert(serial, Pending::Call(reply));
                self.queue(packet);
            }
            Command::OpenStream {
                serial,
                procedure,
                packet,
                packets,
            } => {
                self.pending.insert(
                    serial,
                    Pending::Stream(StreamEntry {
                        tx: packets,
                        procedure,
                        opened: false,
                        aborted: false,
                    }),
                );
                self.queue(packet);
            }
            Command::Subscribe {
                serial,
                packet,
                reply,
                subscriber,
            } => {
                self.pending
                    .insert(serial, Pending::Subscribe(reply, subscriber));
                self.queue(packet);
            }
            Command::Send(packet, permit) => self.queue_with(packet, permit),
        }
    }

    fn control(&mut self, c: Control) {
        match c {
            Control::AbortStream(serial) => {
                if let Some(Pending::Stream(entry)) = self.pending.get_mut(&serial) {
                    if !entry.aborted {
                        // Keep the entry, its consumer gone: later packets are
                        // dropped until the daemon's terminal answer removes it.
                        entry.aborted = true;
                        entry.tx = mpsc::channel(1).0;
                        if entry.opened {
                            let procedure = entry.procedure;
                            self.queue_abort(procedure, serial);
                        }
                    }
                }
            }
            Control::Unsubscribe {
                family,
                callback_id,
                deregister,
            } => {
                if self.subscribers.remove(&(family, callback_id)).is_some() && deregister {
                    let serial = self.handles.serial.fetch_add(1, Ordering::Relaxed);
                    let h = Header::remote(
                        family.deregister_procedure(),
                        MessageType::Call,
                        serial,
                        Status::Ok,
                    );
                    if let Ok(p) = packet::encode_packet(&h, &callback_id) {
                        self.queue(p);
                    }
                }
            }
            Control::ForgetCall(serial) => {
                if matches!(self.pending.get(&serial), Some(Pending::Call(_))) {
                    self.pending.remove(&serial);
                }
            }
            Control::EnableKeepalive => {
                self.keepalive = Some(Keepalive::new(
                    self.config.keepalive_interval,
                    self.config.keepalive_count,
                    Instant::now(),
                ));
                self.arm_keepalive();
            }
            Control::Close => {}
        }
    }

    fn keepalive_tick(&mut self) -> Option<DisconnectReason> {
        let now = Instant::now();
        let paused = self.parked.is_some();
        let ka = self.keepalive.as_mut()?;
        if paused {
            // We chose not to read; silence is ours, not the peer's. The
            // daemon's keepalive, though, counts *our* silence (it drops a
            // client it has heard nothing from for interval × count, 30 s by
            // default): a PING every half interval keeps a link whose reader
            // only waits for a slow stream consumer. Its PONGs wait in the
            // socket until reading resumes.
            ka.received(now);
            self.queue_ping();
            return None;
        }
        match ka.poll(now) {
            Action::Wait => None,
            Action::SendPing => {
                self.queue_ping();
                None
            }
            Action::Dead => Some(DisconnectReason::KeepaliveTimeout {
                interval: self.config.keepalive_interval,
                count: self.config.keepalive_count,
            }),
        }
    }

    fn process_input(&mut self) -> Result<(), DisconnectReason> {
        if let Some(ka) = &mut self.keepalive {
            ka.received(Instant::now());
        }
        while self.parked.is_none() {
            match packet::decode_frame(&mut self.inbuf) {
                Ok(Some(p)) => self.dispatch(p),
                Ok(None) => break,
                Err(e) => return Err(DisconnectReason::Protocol(e)),
            }
        }
        Ok(())
    }

    fn dispatch(&mut self, p: Packet) {
        match p.header.program {
            KEEPALIVE_PROGRAM => {
                // A peer that floods PINGs while not reading would grow the
                // queue without bound: one PONG behind a full queue is as
                // good as many, so none is added then.
                if p.header.procedure == KEEPALIVE_PING
                    && self.outq_bytes < self.config.outgoing_buffer
                {
                    let h = keepalive_header(KEEPALIVE_PONG);
                    if let Ok(pong) = packet::encode_raw(&h, &[]) {
                        self.queue(pong);
                    }
                }
            }
            REMOTE_PROGRAM if p.header.kind == MessageType::Message => self.event(p),
            _ => self.reply(p),
        }
    }

    fn reply(&mut self, p: Packet) {
        let serial = p.header.serial;
        let Some(entry) = self.pending.remove(&serial) else {
            return; // abandoned call (timed out or dropped): discard
        };
        match entry {
            Pending::Call(tx) => {
                let _ = tx.send(p);
            }
            Pending::Subscribe(tx, subscriber) => {
                if p.header.status == Status::Ok {
                    if let Ok(id) = i32::decode(&mut Reader::new(&p.payload)) {
                        self.subscribers.insert((subscriber.family, id), subscriber);
                    }
                }
                let _ = tx.send(p);
            }
            Pending::Stream(mut entry) => {
                let terminal = is_terminal(&p.header);
                if p.header.kind == MessageType::Reply && p.header.status == Status::Ok {
                    entry.opened = true;
                    if entry.aborted {
                        // Its owner left while the open was in flight.
                        self.queue_abort(entry.procedure, serial);
                    }
                }
                let tx = entry.tx.clone();
                if !terminal {
                    self.pending.insert(serial, Pending::Stream(entry));
                }
                match tx.try_send(p) {
                    Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => {}
                    Err(mpsc::error::TrySendError::Full(p)) => self.parked = Some((tx, p)),
                }
            }
        }
    }

    /// Routes an event message to its subscription by family and callback
    /// id, reading nothing else: decoding is the subscriber's.
    fn event(&mut self, p: Packet) {
        let procedure = p.header.procedure;
        let Some(ev) = RawEvent::new(procedure, p.payload) else {
            return; // too short to name a callback: nobody's
        };
        let id = ev.callback_id();
        let subscriber = match family_of(procedure) {
            Some(family) => self.subscribers.get(&(family, id)),
            None => {
                // A kind this crate does not know: the one subscription
                // registered with an unknown id under this callback id.
                let mut candidates = self
                    .subscribers
                    .iter()
                    .filter(|((_, cb), s)| *cb == id && s.takes_unknown)
                    .map(|(_, s)| s);
                match (candidates.next(), candidates.next()) {
                    (Some(s), None) => Some(s),
                    _ => None,
                }
            }
        };
        if let Some(s) = subscriber {
            s.deliver(ev);
        }
    }
}

/// Whether a packet ends its call or stream.
fn is_terminal(h: &Header) -> bool {
    match (h.kind, h.status) {
        (MessageType::Reply, Status::Ok) => false,
        (MessageType::Reply, _) => true,
        (MessageType::Stream, Status::Continue) => false,
        (MessageType::Stream, _) => true,
        _ => false,
    }
}

fn keepalive_header(procedure: i32) -> Header {
    Header {
        program: KEEPALIVE_PROGRAM,
        version: KEEPALIVE_VERSION,
        procedure,
        kind: MessageType::Message,
        serial: 0,
        status: Status::Ok,
    }
}

/// The packet that aborts stream `serial` of `procedure` (STREAM / ERROR with an error
/// payload).
pub(crate) fn abort_packet(
    procedure: i32,
    serial: u32,
    why: &str,
) -> Result<Bytes, crate::proto::xdr::XdrError> {
    let h = Header::remote(procedure, MessageType::Stream, serial, Status::Error);
    // VIR_ERR_RPC (39), VIR_FROM_RPC (7).
    packet::encode_packet(&h, &WireError::new(39, 7, why))
}

async fn write_some<W: AsyncWrite + Unpin>(
    w: &mut W,
    buf: Option<&Bytes>,
) -> std::io::Result<usize> {
    match buf {
        Some(b) => w.write(b).await,
        None => std::future::pending().await,
    }
}

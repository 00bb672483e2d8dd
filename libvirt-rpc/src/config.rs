//! Connection tunables.

use std::time::Duration;

use crate::proto::packet::LEGACY_PAYLOAD_MAX;

/// How a connection behaves. `Config::default()` suits a daemon reached over
/// a local socket or SSH.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Keepalive interval (default 5 s): PINGs go out after half an
    /// interval of silence and then every interval. Only used when the
    /// daemon speaks keepalive (probed during the handshake).
    pub keepalive_interval: Duration,
    /// PINGs sent before a silent link is declared dead (default 5, at least
    /// 1): a link on which nothing arrives dies `interval × count` after its
    /// last packet (see [`crate::proto::keepalive`]).
    pub keepalive_count: u32,
    /// Deadline of each call unless overridden with
    /// [`crate::Client::with_call_timeout`] (default 5 minutes).
    pub call_timeout: Duration,
    /// Capacity of the queue from callers to the connection task, in packets
    /// (default 64). A full queue makes callers wait (backpressure).
    pub outgoing_queue: usize,
    /// Bytes the connection task buffers for writing before it stops taking
    /// packets from the queue (default 1 MiB).
    pub outgoing_buffer: usize,
    /// Payload bytes per upload packet (default [`LEGACY_PAYLOAD_MAX`],
    /// 262,120: what libvirt's own client sends and every daemon accepts.
    /// Measured against libvirtd 11.3, 1 MiB packets were markedly slower
    /// and less steady: the daemon copies each packet into a fresh buffer).
    pub stream_chunk: usize,
    /// Bytes of stream data (all uploads of the connection together) that
    /// may wait to be written (default 4 MiB). With
    /// [`Config::stream_chunk`] this bounds an upload's memory:
    /// `stream_buffer + stream_chunk`.
    pub stream_buffer: usize,
    /// Packets buffered per download stream before the connection stops
    /// reading the socket until the consumer catches up (default 16; see
    /// [`crate::stream`] for what the pause means for other calls).
    pub stream_queue: usize,
    /// Events buffered per subscription; when full, new events are dropped
    /// and counted (default 256).
    pub event_queue: usize,
    /// How long an aborted stream waits for the daemon's confirmation
    /// (default 5 s).
    pub abort_timeout: Duration,
    /// Send buffer (`SO_SNDBUF`) that [`crate::Client::connect_unix`]
    /// requests for its socket (default 1 MiB; 0 keeps the system default;
    /// the kernel caps it at `net.core.wmem_max` and doubles it for its
    /// bookkeeping). With Linux's default (~208 KiB) a 256 KiB upload packet
    /// does not fit in the socket: it trickles in while the daemon's event
    /// loop reads it in small pieces. Measured against libvirtd 11.3 on
    /// 1 GiB of uploads: ~250,000 daemon context switches and ~2.2–3.6 s of
    /// daemon CPU with the default, ~6,000 and ~0.7–0.9 s with 1 MiB. This
    /// is kernel memory, not the process's; it does not count towards the
    /// stream memory bound.
    pub unix_send_buffer: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            keepalive_interval: Duration::from_secs(5),
            keepalive_count: 5,
            call_timeout: Duration::from_secs(300),
            outgoing_queue: 64,
            outgoing_buffer: 1 << 20,
            stream_chunk: LEGACY_PAYLOAD_MAX,
            stream_buffer: 4 << 20,
            stream_queue: 16,
            event_queue: 256,
            abort_timeout: Duration::from_secs(5),
            unix_send_buffer: 1 << 20,
        }
    }
}

impl Config {
    /// Sets the keepalive interval and count.
    pub fn keepalive(mut self, interval: Duration, count: u32) -> Self {
        self.keepalive_interval = interval;
        self.keepalive_count = count;
        self
    }

    /// Sets the default call deadline.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the upload chunk size (clamped to 1 byte ..= the payload maximum).
    pub fn stream_chunk(mut self, bytes: usize) -> Self {
        self.stream_chunk = bytes.clamp(1, crate::proto::packet::PAYLOAD_MAX);
        self
    }
}

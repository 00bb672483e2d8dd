//! Connection tunables.

use std::time::Duration;

use crate::proto::packet::LEGACY_PAYLOAD_MAX;

/// How a connection behaves. `Config::default()` suits a daemon reached over
/// a local socket or SSH.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Silence after which a PING is sent (default 5 s). Only used when the
    /// daemon speaks keepalive (probed during the handshake).
    pub keepalive_interval: Duration,
    /// Unanswered PINGs after which the link is dead (default 5): a silent
    /// link dies `interval × (count + 1)` after its last packet.
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

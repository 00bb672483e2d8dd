//! Connection tunables.
//!
//! Every setting is private and set through a method that clamps it to
//! what the connection can use, so a `Config` never holds a value that
//! would make the connection panic (a zero-capacity queue), stall (a zero
//! write buffer) or overflow the clock (a day-long keepalive × a million
//! PINGs). The clamps live here and only here; the connection reads the
//! fields as they are.

use std::time::Duration;

use tokio::sync::Semaphore;

use crate::proto::keepalive::{MAX_COUNT, MAX_INTERVAL, MIN_INTERVAL};
use crate::proto::packet::{LEGACY_PAYLOAD_MAX, PAYLOAD_MAX};

/// Largest queue capacity or byte budget: tokio's channels and semaphores
/// panic above it.
const MAX_CAPACITY: usize = Semaphore::MAX_PERMITS;

/// How a connection behaves. `Config::default()` suits a daemon reached over
/// a local socket or SSH; each setter says its default and its bounds, and
/// clamps what it is given to them. `{:?}` shows the values in force.
///
/// ```
/// use std::time::Duration;
/// use libvirt_rpc::Config;
///
/// let config = Config::default()
///     .keepalive(Duration::from_secs(2), 3)
///     .call_timeout(Duration::from_secs(30))
///     .event_queue(0); // clamped to 1
/// ```
///
/// The settings cannot be assigned directly, so no value escapes a clamp:
///
/// ```compile_fail,E0616
/// let mut config = libvirt_rpc::Config::default();
/// config.event_queue = 0;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    pub(crate) keepalive_interval: Duration,
    pub(crate) keepalive_count: u32,
    pub(crate) call_timeout: Duration,
    pub(crate) outgoing_queue: usize,
    pub(crate) outgoing_buffer: usize,
    pub(crate) stream_chunk: usize,
    pub(crate) stream_buffer: usize,
    pub(crate) stream_queue: usize,
    pub(crate) event_queue: usize,
    pub(crate) abort_timeout: Duration,
    pub(crate) unix_send_buffer: usize,
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
    /// Sets the keepalive interval (default 5 s; clamped to 2 ms ..= 1 day)
    /// and the PINGs sent before a silent link is declared dead (default 5;
    /// clamped to 1 ..= 1000). PINGs go out after half an interval of
    /// silence and then every interval; a link on which nothing arrives
    /// dies `interval × count` after its last packet. Only used when the
    /// daemon speaks keepalive (probed during the handshake).
    pub fn keepalive(mut self, interval: Duration, count: u32) -> Self {
        self.keepalive_interval = interval.clamp(MIN_INTERVAL, MAX_INTERVAL);
        self.keepalive_count = count.clamp(1, MAX_COUNT);
        self
    }

    /// Sets the deadline of each call unless overridden with
    /// [`crate::Client::with_call_timeout`] (default 5 minutes; any
    /// duration, `Duration::MAX` meaning none).
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Sets the capacity of the queue from callers to the connection task,
    /// in packets (default 64; at least 1). A full queue makes callers wait
    /// (backpressure).
    pub fn outgoing_queue(mut self, packets: usize) -> Self {
        self.outgoing_queue = packets.clamp(1, MAX_CAPACITY);
        self
    }

    /// Sets the bytes the connection task buffers for writing before it
    /// stops taking packets from the queue (default 1 MiB; at least 1).
    pub fn outgoing_buffer(mut self, bytes: usize) -> Self {
        self.outgoing_buffer = bytes.max(1);
        self
    }

    /// Sets the payload bytes per upload packet (default 262,120, libvirt's
    /// legacy payload maximum: what its own client sends and every daemon
    /// accepts; clamped to 1 ..= the protocol's payload maximum). Measured
    /// against libvirtd 11.3, 1 MiB packets were markedly slower and less
    /// steady: the daemon copies each packet into a fresh buffer.
    pub fn stream_chunk(mut self, bytes: usize) -> Self {
        self.stream_chunk = bytes.clamp(1, PAYLOAD_MAX);
        self
    }

    /// Sets the bytes of stream data (all uploads of the connection
    /// together) that may wait to be written (default 4 MiB; at least 1).
    /// With [`Config::stream_chunk`] this bounds an upload's memory:
    /// `stream_buffer + stream_chunk`.
    pub fn stream_buffer(mut self, bytes: usize) -> Self {
        self.stream_buffer = bytes.clamp(1, MAX_CAPACITY);
        self
    }

    /// Sets the packets buffered per download stream before the connection
    /// stops reading the socket until the consumer catches up (default 16;
    /// at least 1; see [`crate::stream`] for what the pause means for other
    /// calls).
    pub fn stream_queue(mut self, packets: usize) -> Self {
        self.stream_queue = packets.clamp(1, MAX_CAPACITY);
        self
    }

    /// Sets the events buffered per subscription; when full, new events are
    /// dropped and counted (default 256; at least 1).
    pub fn event_queue(mut self, events: usize) -> Self {
        self.event_queue = events.clamp(1, MAX_CAPACITY);
        self
    }

    /// Sets how long an aborted stream waits for the daemon's confirmation
    /// (default 5 s).
    pub fn abort_timeout(mut self, timeout: Duration) -> Self {
        self.abort_timeout = timeout;
        self
    }

    /// Sets the send buffer (`SO_SNDBUF`) that [`crate::Client::connect_unix`]
    /// requests for its socket (default 1 MiB; 0 keeps the system default;
    /// at most `i32::MAX`; the kernel caps it at `net.core.wmem_max` and
    /// doubles it for its bookkeeping). With Linux's default (~208 KiB) a
    /// 256 KiB upload packet does not fit in the socket: it trickles in
    /// while the daemon's event loop reads it in small pieces. Measured
    /// against libvirtd 11.3 on 1 GiB of uploads: ~250,000 daemon context
    /// switches and ~2.2–3.6 s of daemon CPU with the default, ~6,000 and
    /// ~0.7–0.9 s with 1 MiB. This is kernel memory, not the process's; it
    /// does not count towards the stream memory bound.
    pub fn unix_send_buffer(mut self, bytes: usize) -> Self {
        self.unix_send_buffer = bytes.min(i32::MAX as usize);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_huge_capacities_are_clamped_to_what_tokio_accepts() {
        for n in [0, usize::MAX] {
            let c = Config::default()
                .outgoing_queue(n)
                .stream_queue(n)
                .event_queue(n)
                .stream_buffer(n);
            // The connection builds these as given; none may panic.
            let _ = tokio::sync::mpsc::channel::<()>(c.outgoing_queue);
            let _ = tokio::sync::mpsc::channel::<()>(c.stream_queue);
            let _ = tokio::sync::mpsc::channel::<()>(c.event_queue);
            let _ = Semaphore::new(c.stream_buffer);
        }
    }

    #[test]
    fn zero_write_buffer_and_chunk_are_raised_to_one() {
        let c = Config::default().outgoing_buffer(0).stream_chunk(0);
        assert_eq!((c.outgoing_buffer, c.stream_chunk), (1, 1));
        assert_eq!(
            Config::default().stream_chunk(usize::MAX).stream_chunk,
            PAYLOAD_MAX
        );
    }

    #[test]
    fn keepalive_is_clamped_where_it_is_set() {
        // The reported values (in `DisconnectReason::KeepaliveTimeout`) are
        // the ones in force.
        let c = Config::default().keepalive(Duration::ZERO, 0);
        assert_eq!((c.keepalive_interval, c.keepalive_count), (MIN_INTERVAL, 1));
        let c = Config::default().keepalive(Duration::MAX, u32::MAX);
        assert_eq!(
            (c.keepalive_interval, c.keepalive_count),
            (MAX_INTERVAL, MAX_COUNT)
        );
    }

    #[test]
    fn send_buffer_fits_the_socket_option() {
        let c = Config::default().unix_send_buffer(usize::MAX);
        assert_eq!(c.unix_send_buffer, i32::MAX as usize);
        assert_eq!(Config::default().unix_send_buffer(0).unix_send_buffer, 0);
    }
}

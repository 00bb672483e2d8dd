//! [`Process`]: the standard `process_*` families every exporter serves,
//! unprefixed as Prometheus names them, read from `/proc/self` at each
//! scrape.
//!
//! | family | type |
//! |---|---|
//! | `process_cpu_seconds_total` | counter |
//! | `process_resident_memory_bytes` | gauge |
//! | `process_open_fds` | gauge |
//! | `process_max_fds` | gauge |
//!
//! A file that cannot be read or parsed leaves its family out of that
//! scrape (logged at debug), never an error for the whole `/metrics`.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// Clock ticks per second in `/proc/<pid>/stat`: Linux's `USER_HZ`, 100 on
/// every architecture (a fixed ABI value, whatever the kernel's `HZ`).
const USER_HZ: f64 = 100.0;

/// The collector (stateless: everything is read at the scrape).
#[derive(Debug, Clone, Copy, Default)]
pub struct Process;

/// `utime + stime` in ticks from `/proc/self/stat`'s text. The command
/// name (field 2) may hold spaces and parentheses: fields are counted
/// from the last `)`.
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')' comes field 3 (state); utime is field 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    utime.checked_add(stime)
}

/// `VmRSS` in bytes from `/proc/self/status`'s text.
pub(super) fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// The soft limit of open files from `/proc/self/limits`' text.
pub(super) fn max_fds(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .inspect_err(|e| tracing::debug!(path, error = %e, "process metrics: read failed"))
        .ok()
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<u64>,
) -> Result<(), std::fmt::Error> {
    let Some(v) = value.and_then(|v| i64::try_from(v).ok()) else {
        return Ok(());
    };
    let g = ConstGauge::new(v);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for Process {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(ticks) = read("/proc/self/stat").as_deref().and_then(cpu_ticks) {
            // Ticks stay far below 2^53: the conversion is exact.
            let c = ConstCounter::new(ticks as f64 / USER_HZ);
            let m = encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&prometheus_client::registry::Unit::Seconds),
                c.metric_type(),
            )?;
            c.encode(m)?;
        }
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            read("/proc/self/status").as_deref().and_then(rss_bytes),
        )?;
        let open = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        gauge(
            &mut encoder,
            "process_open_fds",
            "Number of open file descriptors",
            open,
        )?;
        gauge(
            &mut encoder,
            "process_max_fds",
            "Maximum number of open file descriptors",
            read("/proc/self/limits").as_deref().and_then(max_fds),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        let stat =
            "4242 (op (x) y) S 1 4242 4242 0 -1 4194560 1520 0 0 0 250 75 0 0 20 0 9 0 1234 0 0";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(cpu_ticks("4242 (op) S 1"), None, "truncated");
        assert_eq!(cpu_ticks("garbage"), None);
        let status = "Name:\top\nVmHWM:\t  9000 kB\nVmRSS:\t  8192 kB\nThreads:\t9\n";
        assert_eq!(rss_bytes(status), Some(8192 * 1024));
        assert_eq!(rss_bytes("Name: op\n"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        assert_eq!(max_fds(limits), Some(1_048_576));
        assert_eq!(max_fds("Max open files  unlimited unlimited files\n"), None);
    }

    #[test]
    fn this_process_reads_its_own_files() {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        assert!(cpu_ticks(&stat).is_some(), "{stat}");
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        assert!(rss_bytes(&status).is_some_and(|b| b > 0));
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        assert!(max_fds(&limits).is_some_and(|n| n > 0));
    }
}

//! What the benchmarks share: `cargo bench`'s filter and their
//! environment knobs, the runtime they drive both sides on, the call rate
//! of concurrent tasks, the medians and per-round ratios they print, and
//! the machine's CPU by process over a phase.

use std::future::Future;
use std::time::Instant;

/// Whether `cargo bench`'s arguments name a benchmark other than `name`
/// (it passes `--bench`, then any filter given): such a run skips this one.
pub fn filtered_out(name: &str) -> bool {
    std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && a != name)
}

/// The environment variable `name` as a number, else `default` (a knob a
/// benchmark documents).
pub fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The multi-threaded runtime (two workers, IO and time enabled) a
/// benchmark runs its rounds on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// The median of `samples` (the upper one of an even count; NaN when there
/// are none).
pub fn median(samples: &[f64]) -> f64 {
    let mut samples = samples.to_vec();
    samples.sort_by(f64::total_cmp);
    samples.get(samples.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Operations per second of `tasks` tasks each running `op` `per` times
/// one after another (spawned on the current runtime, all awaited).
pub async fn concurrent_rate<F, Fut>(tasks: usize, per: usize, op: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let t0 = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let op = op.clone();
            tokio::spawn(async move {
                for _ in 0..per {
                    op().await;
                }
            })
        })
        .collect();
    for h in handles {
        h.await.unwrap();
    }
    (per * tasks) as f64 / t0.elapsed().as_secs_f64()
}

/// `"1.10x (median of per-round ratios; per round: 1.08 1.10 1.12)"`: a
/// ratio headline and the rounds it comes from.
pub fn ratio_summary(ratios: &[f64]) -> String {
    format!(
        "{:.2}x (median of per-round ratios; per round: {})",
        median(ratios),
        ratios
            .iter()
            .map(|r| format!("{r:.2}"))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Waits, at most `within`, until the processes named `comms` (as
/// [`pids_named`]) together use less than `cores` of CPU over half a
/// second: a timed phase then starts on a quiet machine, not during the
/// tail of the last one (a garbage collector's sweep, a namespace's
/// deletion). Returns whether they settled.
pub async fn quiesce(comms: &[&str], cores: f64, within: std::time::Duration) -> bool {
    const WINDOW: std::time::Duration = std::time::Duration::from_millis(500);
    let pids: Vec<u32> = comms.iter().flat_map(|c| pids_named(c)).collect();
    let used = || pids.iter().map(|p| cpu_seconds(*p)).sum::<f64>();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let before = used();
        tokio::time::sleep(WINDOW).await;
        if (used() - before) / WINDOW.as_secs_f64() < cores {
            return true;
        }
    }
    false
}

/// CPU seconds (user + system) process `pid` has used; 0 when it is gone.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (num(11) + num(12)) as f64 / 100.0
}

/// CPU seconds used so far by every process on the machine, summed by
/// name (`/proc/PID/comm`; kernel workers as one, `kworker`). Two snapshots around a phase say what the
/// machine spent it on ([`cpu_spent`]); processes that both start and end
/// within the phase are not seen.
pub fn cpu_by_name() -> std::collections::BTreeMap<String, f64> {
    let mut by_name = std::collections::BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return by_name;
    };
    for pid in entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
    {
        if let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            // A kernel worker's name says what it works on now
            // (`kworker/1:0-events`); they count as one.
            let name = if comm.starts_with("kworker/") {
                "kworker"
            } else {
                comm.trim()
            };
            *by_name.entry(name.to_owned()).or_insert(0.0) += cpu_seconds(pid);
        }
    }
    by_name
}

/// What the machine spent between two [`cpu_by_name`] snapshots: the
/// `top` names by CPU seconds, largest first, as `name 1.23 s, ...`, and
/// the total over every name.
pub fn cpu_spent(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
    top: usize,
) -> String {
    let mut spent: Vec<(&str, f64)> = after
        .iter()
        .map(|(name, s)| (name.as_str(), s - before.get(name).copied().unwrap_or(0.0)))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    spent.sort_by(|a, b| b.1.total_cmp(&a.1));
    let total: f64 = spent.iter().map(|(_, s)| s).sum();
    let named: Vec<String> = spent
        .iter()
        .take(top)
        .map(|(name, s)| format!("{name} {s:.2} s"))
        .collect();
    format!("{total:.2} s CPU: {}", named.join(", "))
}

/// The pids of the processes named `comm` (as in `/proc/PID/comm`).
pub fn pids_named(comm: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_spent_names_the_largest_deltas_first() {
        let before = [("a".to_owned(), 1.0), ("b".to_owned(), 2.0)].into();
        let after = [
            ("a".to_owned(), 1.5),
            ("b".to_owned(), 4.0),
            ("c".to_owned(), 0.25),
        ]
        .into();
        assert_eq!(
            cpu_spent(&before, &after, 2),
            "2.75 s CPU: b 2.00 s, a 0.50 s"
        );
        assert!(
            cpu_by_name().values().any(|s| *s > 0.0),
            "this process runs"
        );
    }

    #[test]
    fn ratio_summary_gives_the_median_and_every_round() {
        assert_eq!(
            ratio_summary(&[1.2, 0.9, 1.0]),
            "1.00x (median of per-round ratios; per round: 1.20 0.90 1.00)"
        );
    }

    #[test]
    fn concurrent_rate_runs_every_operation() {
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = count.clone();
        let rate = runtime().block_on(concurrent_rate(3, 4, move || {
            let c = c.clone();
            async move {
                c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }));
        assert_eq!(count.load(std::sync::atomic::Ordering::Relaxed), 12);
        assert!(rate > 0.0);
    }

    #[test]
    fn median_is_the_middle_sample_or_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(&[]).is_nan());
    }
}

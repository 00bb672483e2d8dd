//! The API server's CPU profile over a benchmark's phase: Go's profiler
//! at `/debug/pprof/profile`, which the sandbox serves when started with
//! `KVM2_SANDBOX_APISERVER_PROFILING` set.
//!
//! A phase's length is not known when it starts, so [`Profile`] takes
//! back-to-back one-second profiles until it is finished; `go tool pprof
//! -top DIR/PHASE-*.pb.gz` merges them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sandbox_kit::KubeService;

/// Profiles being taken of the API server, one second each.
pub struct Profile {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<PathBuf>>,
}

impl Profile {
    /// Starts profiling into `dir/PHASE-NNN.pb.gz` (`dir` made if needed).
    ///
    /// # Panics
    /// When `dir` cannot be made.
    pub fn start(kube: &KubeService, dir: &Path, phase: &str) -> Profile {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let stop = Arc::new(AtomicBool::new(false));
        let (kubeconfig, dir, phase) = (kube.kubeconfig.clone(), dir.to_owned(), phase.to_owned());
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut taken = Vec::new();
            while !stopped.load(Ordering::Acquire) {
                let path = dir.join(format!("{phase}-{:03}.pb.gz", taken.len()));
                let Ok(file) = std::fs::File::create(&path) else {
                    break;
                };
                let ok = Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["get", "--raw", "/debug/pprof/profile?seconds=1"])
                    .stdout(file)
                    .stderr(Stdio::inherit())
                    .status()
                    .is_ok_and(|s| s.success());
                if !ok {
                    eprintln!(
                        "pprof: no profile (was the sandbox started with KVM2_SANDBOX_APISERVER_PROFILING?)"
                    );
                    let _ = std::fs::remove_file(&path);
                    break;
                }
                taken.push(path);
            }
            taken
        });
        Profile { stop, thread }
    }

    /// Stops after the profile being taken (at most a second) and returns
    /// the files; the wait for that profile runs off the async runtime.
    pub async fn finish(self) -> Vec<PathBuf> {
        self.stop.store(true, Ordering::Release);
        let thread = self.thread;
        tokio::task::spawn_blocking(move || thread.join().unwrap_or_default())
            .await
            .unwrap_or_default()
    }
}

//! Diagnostic: runs only our side of the call-rate benchmark (N calls of
//! `CONNECT_GET_LIB_VERSION` from K tasks on one connection), so that the
//! daemon can be traced (`strace -c -f -p`, `perf stat -p`) during it.
//!
//! `KVM2_SANDBOX=... cargo run --release -p libvirt-rpc-probes --bin call_probe -- N K [WORKERS]`
//! (WORKERS 0 = a current-thread runtime; default 2). Environment knobs:
//! `BATCHES` (timed batches on the same connection, default 1), `FRESH`
//! (a new connection per batch), `NO_KEEPALIVE` (handshake without the
//! keepalive probe, so libvirtd runs no keepalive for this client), `RSS`
//! (print the resident set size after each batch).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use libvirt_rpc::*;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let n = args.first().copied().unwrap_or(48_000);
    let k = args.get(1).copied().unwrap_or(16);
    let workers = args.get(2).copied().unwrap_or(2);
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()
            .unwrap()
    };
    rt.block_on(async {
        let d = testkit::Descriptor::require();
        let open = || async {
            if std::env::var_os("NO_KEEPALIVE").is_some() {
                // The handshake without the keepalive probe (which also starts
                // the daemon's keepalive for this client).
                let s = tokio::net::UnixStream::connect(&d.libvirt.socket)
                    .await
                    .unwrap();
                let c = Client::new(s, Config::default());
                c.auth_list().await.unwrap();
                c.connect_open(Some(&d.libvirt.test_uri), OpenFlags::empty())
                    .await
                    .unwrap();
                c
            } else {
                Client::connect_unix(
                    &d.libvirt.socket,
                    &d.libvirt.test_uri,
                    OpenFlags::empty(),
                    Config::default(),
                )
                .await
                .unwrap()
            }
        };
        let mut c = open().await;
        c.connect_get_lib_version().await.unwrap();
        let fresh = std::env::var_os("FRESH").is_some();
        let per = n / k;
        let batches: usize = std::env::var("BATCHES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1);
        for b in 0..batches {
            if fresh && b > 0 {
                c.close().await;
                c = open().await;
                c.connect_get_lib_version().await.unwrap();
            }
            let client = c.clone();
            let rate = testkit::bench::concurrent_rate(k, per, move || {
                let c = client.clone();
                async move {
                    c.connect_get_lib_version().await.unwrap();
                }
            })
            .await;
            let rss = std::fs::read_to_string("/proc/self/status")
                .unwrap_or_default()
                .lines()
                .find(|l| l.starts_with("VmRSS"))
                .unwrap_or_default()
                .to_string();
            println!("{rate:.0}");
            if std::env::var_os("RSS").is_some() {
                eprintln!("{rss}");
            }
        }
        c.close().await;
    });
}

//! `cargo xtask bench libvirt-rpc` (this part alone: `cargo bench -p
//! libvirt-rpc --bench domain_stats`): the largest typed-parameter replies,
//! `CONNECT_GET_ALL_DOMAIN_STATS` for 100 running domains of libvirt's test
//! driver, fetched by libvirt-rpc's generated method and by python3-libvirt
//! (`conn.getAllDomainStats()`, the C client) in the same run, against the
//! sandbox daemon.
//!
//! Both open `test:///<file>` with the same 100-domain configuration (each
//! connection gets its own driver instance from the file, so the replies
//! are the same) and make one warm-up call; then rounds alternate which
//! side goes first, each timing `CALLS` calls, and the median of the
//! per-round ratios (ours / theirs in calls per second) is the headline.
//! Printed too: the reply's size and our codec's decode and encode
//! throughput on it (the daemon excluded). Asserts nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

use libvirt_rpc::proto::xdr::{from_bytes, to_bytes};
use libvirt_rpc::remote::ConnectGetAllDomainStatsRet;
use libvirt_rpc::{Client, Config, ConnectGetAllDomainStatsFlags, OpenFlags};
use testkit::Descriptor;
use testkit::bench::{median, ratio_summary, runtime};

const DOMAINS: usize = 100;
const CALLS: usize = 200;
const ROUNDS: usize = 7;

/// N calls of getAllDomainStats on one connection; prints seconds and the
/// process's CPU seconds over them.
const PY: &str = r#"
import sys, time, libvirt
uri, n = sys.argv[1], int(sys.argv[2])
c = libvirt.open(uri)
c.getAllDomainStats()
t0, cpu0 = time.perf_counter(), time.process_time()
for _ in range(n):
    c.getAllDomainStats()
print(time.perf_counter() - t0, time.process_time() - cpu0)
c.close()
"#;

fn node_xml() -> String {
    let mut xml = String::from("<node>\n");
    for i in 0..DOMAINS {
        let _ = writeln!(
            xml,
            "<domain type='test'><name>stats-{i:03}</name>\
             <uuid>00000000-0000-4000-8000-{i:012}</uuid>\
             <memory>262144</memory><currentMemory>131072</currentMemory><vcpu>2</vcpu>\
             <os><type>hvm</type></os></domain>"
        );
    }
    xml.push_str("</node>\n");
    xml
}

fn python_rate(uri: &str) -> f64 {
    let out = testkit::run::stdout(Command::new("/usr/bin/python3").args([
        "-c",
        PY,
        uri,
        &CALLS.to_string(),
    ]));
    let seconds: f64 = out.split_whitespace().next().unwrap().parse().unwrap();
    CALLS as f64 / seconds
}

async fn our_rate(c: &Client) -> f64 {
    let t0 = Instant::now();
    for _ in 0..CALLS {
        c.connect_get_all_domain_stats(&[], 0, ConnectGetAllDomainStatsFlags::empty())
            .await
            .unwrap();
    }
    CALLS as f64 / t0.elapsed().as_secs_f64()
}

fn main() {
    let d = Descriptor::require();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.xml");
    std::fs::write(&file, node_xml()).unwrap();
    let name = format!("test://{}", file.display());
    let py_uri = d.virsh_uri(&name);
    runtime().block_on(async {
        let c = Client::connect_unix(&d.libvirt.socket, &name, OpenFlags::empty(), Config::default())
            .await
            .unwrap();
        let records = c
            .connect_get_all_domain_stats(&[], 0, ConnectGetAllDomainStatsFlags::empty())
            .await
            .unwrap();
        let params: usize = records.iter().map(|r| r.params.len()).sum();
        assert_eq!(records.len(), DOMAINS);

        // The codec alone, on the same reply.
        let reply = ConnectGetAllDomainStatsRet { ret_stats: records };
        let wire = to_bytes(&reply).unwrap();
        let n = 2_000;
        let t0 = Instant::now();
        for _ in 0..n {
            std::hint::black_box(from_bytes::<ConnectGetAllDomainStatsRet>(&wire).unwrap());
        }
        let decode = (wire.len() * n) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        let t0 = Instant::now();
        for _ in 0..n {
            std::hint::black_box(to_bytes(&reply).unwrap());
        }
        let encode = (wire.len() * n) as f64 / t0.elapsed().as_secs_f64() / 1e6;
        println!(
            "domain stats reply: {DOMAINS} domains, {params} typed parameters, {} bytes; libvirt-rpc codec: decode {decode:.0} MB/s ({:.0} µs per reply), encode {encode:.0} MB/s",
            wire.len(),
            wire.len() as f64 / decode
        );

        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (o, t) = if round % 2 == 0 {
                let o = our_rate(&c).await;
                (o, python_rate(&py_uri))
            } else {
                let t = python_rate(&py_uri);
                (our_rate(&c).await, t)
            };
            eprintln!("  round {round}: libvirt-rpc {o:.0}/s, python3-libvirt {t:.0}/s");
            ours.push(o);
            theirs.push(t);
            ratios.push(o / t);
        }
        c.close().await;
        println!(
            "getAllDomainStats of {DOMAINS} domains, {CALLS} calls per round, medians of {ROUNDS} interleaved rounds: libvirt-rpc {:.0}/s, python3-libvirt (C client) {:.0}/s, ratio {}",
            median(&ours),
            median(&theirs),
            ratio_summary(&ratios)
        );
    });
}

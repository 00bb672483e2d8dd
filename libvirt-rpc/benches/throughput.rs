//! `cargo xtask bench libvirt-rpc`: libvirt-rpc against libvirt's own C
//! client, in the same run, against the sandbox daemon.
//!
//! - upload of 256 MiB into the sandbox's `dir` pool over the unix socket,
//!   vs `virsh vol-upload`, and the daemon's own ceiling: an ideal client
//!   that writes prebuilt stream packets in one `write_all` (no client can
//!   be faster than it, so `1 / (virsh's share of it)` bounds any ratio);
//! - call rate of a cheap procedure (`CONNECT_GET_LIB_VERSION`), sequential
//!   and 16 concurrent callers on one connection, vs python3-libvirt (the C
//!   client) with 16 threads on one connection;
//! - peak RSS growth of this process during the upload;
//! - event delivery: a burst of 10,000 domain lifecycle events (20 running
//!   `test:///default` domains suspended and resumed by 20 tasks of a
//!   generator connection, as fast as the daemon takes the calls),
//!   received by a libvirt-rpc subscription vs python3-libvirt's default
//!   event loop (`virEventRegisterDefaultImpl`, `domainEventRegisterAny`,
//!   a thread running `virEventRunDefaultImpl`) in another process. Each
//!   round times one receiver from the generator's start to the receipt
//!   of the burst's last event (events/s), and says how long after the
//!   generator's last call that was (the receiver's lag): the same burst,
//!   generated the same way, so the ratio compares the receivers.
//!
//! Prints figures and ratios (>1.0 = libvirt-rpc faster); asserts nothing.
//! The machine is shared, so rounds are interleaved (the side that goes
//! first alternates), each round yields a ratio, and the **median of the
//! per-round ratios** is the headline (best-of figures are printed too);
//! the load average is printed before and after.
//!
//! Fairness: both sides connect to the same daemon socket the way their
//! library does it (`Client::connect_unix`; `virsh`/python through
//! libvirt's own unix transport); both make one warm-up call first; both
//! make the same number of calls of the same procedure from the same number
//! of callers (16 tokio tasks on a 2-worker runtime vs 16 Python threads),
//! and connection setup is outside the timed region of the call rounds. An
//! upload round of ours is timed from connect to close (connect, pool and
//! volume lookup, upload), like a `virsh vol-upload` run (which also pays
//! for its process start, a few ms).
//!
//! The C client opened by `libvirt.open` runs without keepalive (Python has
//! no event loop unless one is registered), while ours probes and runs it,
//! which makes libvirtd do a little more per received packet (it restarts
//! the client's keepalive timer); `LVRPC_C_KEEPALIVE=1` gives the C client
//! an event loop and keepalive 5 s × 5, as `virsh` runs.
//!
//! `LVRPC_COMPARE_NO_KEEPALIVE=1` adds, first in each call round, a
//! connection of ours opened without the keepalive probe (diagnostic).
//!
//! Knobs: `LVRPC_CHUNK` (upload chunk bytes), `LVRPC_WORKERS` (tokio worker
//! threads, default 2), `LVRPC_CALLS_ONLY`, `LVRPC_UPLOAD_ONLY`,
//! `LVRPC_EVENTS_ONLY`, `LVRPC_EVENT_ROUNDS` (default 7),
//! `LVRPC_OURS_ONLY` (skip virsh), `LVRPC_ROUNDS` (upload rounds, default
//! 7), `LVRPC_CALL_ROUNDS` (call rounds per phase, default 11: many short
//! rounds track the shared machine's load swings better than a few long ones).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::time::{Duration, Instant};

use libvirt_rpc::{
    Client, Config, Domain, OpenFlags, StorageVolCreateFlags, StorageVolDeleteFlags,
    StorageVolStreamFlags,
};
use testkit::Descriptor;
use testkit::bench::{concurrent_rate, median, ratio_summary};

const UPLOAD: u64 = 256 << 20;
const SEQ_CALLS: usize = 5_000;
const CONC_CALLS: usize = 24_000;
const THREADS: usize = 16;
const ROUNDS: usize = 7;
const CALL_ROUNDS: usize = 11;
const EVENTS: usize = 10_000;
const EVENT_DOMAINS: usize = 20;
const EVENT_ROUNDS: usize = 7;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn config() -> Config {
    let mut config = Config::default();
    if let Some(chunk) = std::env::var("LVRPC_CHUNK")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config = config.stream_chunk(chunk);
    }
    config
}

async fn connect(d: &Descriptor, uri: &str) -> Client {
    Client::connect_unix(&d.libvirt.socket, uri, OpenFlags::empty(), config())
        .await
        .unwrap()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// (user+sys CPU seconds, minor faults) of this process so far.
fn cpu_and_faults() -> (f64, u64) {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // After the command name: state=0, minflt=7, utime=11, stime=12.
    ((num(11) + num(12)) as f64 / 100.0, num(7))
}

/// CPU seconds the sandbox daemon has used so far.
fn daemon_cpu(d: &Descriptor) -> f64 {
    let pid = std::fs::read_to_string(&d.libvirt.pid_file).unwrap_or_default();
    let s = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (num(11) + num(12)) as f64 / 100.0
}

fn mib_s(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / t.as_secs_f64()
}

/// libvirtd's ceiling for an upload: an "ideal client" that does no work
/// per byte but hand prebuilt stream packets to the kernel. It speaks the
/// protocol by hand (the crate's sans-IO `proto`): `AUTH_LIST`,
/// `CONNECT_OPEN`, the pool and volume lookups, `STORAGE_VOL_UPLOAD`, then
/// one `write_all` of every stream packet (built before the clock starts,
/// from the file's bytes in memory) and the final empty packet, and waits
/// for the daemon's confirmation — what no real client can beat.
struct IdealUpload {
    /// Every stream packet of the upload (serial [`IDEAL_UPLOAD_SERIAL`]),
    /// the final empty one included.
    packets: Vec<u8>,
}

const IDEAL_UPLOAD_SERIAL: u32 = 5;

impl IdealUpload {
    fn new(data: &[u8]) -> Self {
        use libvirt_rpc::proto::packet::{self, Header, MessageType, Status};
        let header = |status| {
            Header::remote(
                libvirt_rpc::proc_num::STORAGE_VOL_UPLOAD,
                MessageType::Stream,
                IDEAL_UPLOAD_SERIAL,
                status,
            )
        };
        let mut packets = Vec::with_capacity(data.len() + data.len() / 1000 + 64);
        for chunk in data.chunks(packet::LEGACY_PAYLOAD_MAX) {
            packets
                .extend_from_slice(&packet::encode_raw(&header(Status::Continue), chunk).unwrap());
        }
        packets.extend_from_slice(&packet::encode_raw(&header(Status::Ok), &[]).unwrap());
        Self { packets }
    }

    /// One upload into volume `vol` of `pool`, timed from connect to the
    /// daemon's confirmation.
    async fn run(&self, d: &Descriptor, pool: &str, vol: &str) -> Duration {
        use libvirt_rpc::proc_num;
        use libvirt_rpc::remote::{StoragePool, StorageVol};
        use tokio::io::AsyncWriteExt;
        let t0 = Instant::now();
        let mut raw = RawLink {
            socket: tokio::net::UnixStream::connect(&d.libvirt.socket)
                .await
                .unwrap(),
            buf: bytes::BytesMut::new(),
        };
        let _: Vec<i32> = raw.call(proc_num::AUTH_LIST, 1, &()).await;
        let _: () = raw
            .call(
                proc_num::CONNECT_OPEN,
                2,
                &(Some(d.libvirt.qemu_uri.as_str()), 0u32),
            )
            .await;
        let p: StoragePool = raw
            .call(proc_num::STORAGE_POOL_LOOKUP_BY_NAME, 3, &(pool,))
            .await;
        let v: StorageVol = raw
            .call(proc_num::STORAGE_VOL_LOOKUP_BY_NAME, 4, &(&p, vol))
            .await;
        let _: () = raw
            .call(
                proc_num::STORAGE_VOL_UPLOAD,
                IDEAL_UPLOAD_SERIAL,
                &(&v, 0u64, UPLOAD, 0u32),
            )
            .await;
        raw.socket.write_all(&self.packets).await.unwrap();
        // The daemon's own empty stream packet confirms the upload.
        loop {
            let p = raw.packet().await;
            if p.header.kind == libvirt_rpc::proto::packet::MessageType::Stream {
                assert_eq!(
                    p.header.status,
                    libvirt_rpc::proto::packet::Status::Ok,
                    "ideal upload refused"
                );
                break;
            }
        }
        t0.elapsed()
    }
}

/// A unix socket to libvirtd and its receive buffer, for [`IdealUpload`].
struct RawLink {
    socket: tokio::net::UnixStream,
    buf: bytes::BytesMut,
}

impl RawLink {
    async fn packet(&mut self) -> libvirt_rpc::proto::packet::Packet {
        use tokio::io::AsyncReadExt;
        loop {
            if let Some(p) = libvirt_rpc::proto::packet::decode_frame(&mut self.buf).unwrap() {
                return p;
            }
            let n = self.socket.read_buf(&mut self.buf).await.unwrap();
            assert!(n > 0, "libvirtd closed the ideal client's socket");
        }
    }

    async fn call<A, R>(&mut self, procedure: i32, serial: u32, args: &A) -> R
    where
        A: libvirt_rpc::proto::xdr::Encode + ?Sized,
        R: libvirt_rpc::proto::xdr::Decode,
    {
        use libvirt_rpc::proto::packet::{self, Header, MessageType, Status};
        use tokio::io::AsyncWriteExt;
        let h = Header::remote(procedure, MessageType::Call, serial, Status::Ok);
        self.socket
            .write_all(&packet::encode_packet(&h, args).unwrap())
            .await
            .unwrap();
        loop {
            let p = self.packet().await;
            if p.header.kind == MessageType::Reply && p.header.serial == serial {
                assert_eq!(p.header.status, Status::Ok, "procedure {procedure} failed");
                return libvirt_rpc::proto::xdr::from_bytes(&p.payload).unwrap();
            }
        }
    }
}

async fn upload_bench(d: &Descriptor) {
    let c = connect(d, &d.libvirt.qemu_uri).await;
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src.img");
    {
        let mut data = vec![0u8; 1 << 20];
        let mut f = std::fs::File::create(&src).unwrap();
        for i in 0..(UPLOAD >> 20) {
            data.iter_mut()
                .enumerate()
                .for_each(|(j, b)| *b = (i as usize ^ j) as u8);
            std::io::Write::write_all(&mut f, &data).unwrap();
        }
        // Written back now, so that no round pays for it.
        f.sync_all().unwrap();
    }
    let pid = std::process::id();
    let mk = |tag: &str| format!("lvrpc-bench-{tag}-{pid}");
    let xml = |name: &str| {
        format!(
            "<volume><name>{name}</name><capacity unit='bytes'>{UPLOAD}</capacity>\
             <allocation unit='bytes'>0</allocation><target><format type='raw'/></target></volume>"
        )
    };
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ideal, mut of_ideal, mut virsh_of_ideal) = (Vec::new(), Vec::new(), Vec::new());
    let ideal_upload = IdealUpload::new(&std::fs::read(&src).unwrap());
    let mut rss_growth = 0u64;
    let rounds = std::env::var("LVRPC_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ROUNDS);
    let skip_virsh = std::env::var_os("LVRPC_OURS_ONLY").is_some();
    eprintln!("upload: load average before {}", loadavg());
    for round in 0..rounds {
        let mut t_ours = Duration::ZERO;
        let mut t_theirs = Duration::ZERO;
        let mut t_ideal = Duration::ZERO;
        // The side that goes first rotates.
        for side in [round % 3, (round + 1) % 3, (round + 2) % 3] {
            if side == 2 {
                // The daemon's ceiling: the ideal client.
                let name = mk("ideal");
                let vol = c
                    .storage_vol_create_xml(&pool, &xml(&name), StorageVolCreateFlags::empty())
                    .await
                    .unwrap();
                t_ideal = ideal_upload.run(d, &d.pool.name, &name).await;
                c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
                    .await
                    .unwrap();
            } else if side == 0 {
                // virsh vol-upload (libvirt's C client)
                let name = mk("virsh");
                let vol = c
                    .storage_vol_create_xml(&pool, &xml(&name), StorageVolCreateFlags::empty())
                    .await
                    .unwrap();
                let t0 = Instant::now();
                let st = if skip_virsh {
                    Command::new("true").status().unwrap()
                } else {
                    Command::new("virsh")
                        .args(["-c", &d.virsh_uri(&d.libvirt.qemu_uri), "vol-upload", &name])
                        .arg(&src)
                        .args(["--pool", &d.pool.name])
                        .status()
                        .unwrap()
                };
                t_theirs = t0.elapsed();
                assert!(st.success(), "virsh vol-upload failed");
                c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
                    .await
                    .unwrap();
            } else {
                // libvirt-rpc, timed from connect to close like a virsh run.
                let name = mk("ours");
                let vol = c
                    .storage_vol_create_xml(&pool, &xml(&name), StorageVolCreateFlags::empty())
                    .await
                    .unwrap();
                let _ = std::fs::write("/proc/self/clear_refs", "5"); // reset VmHWM
                let base = status_kib("VmRSS:");
                let (cpu0, flt0) = cpu_and_faults();
                let t0 = Instant::now();
                let up = connect(d, &d.libvirt.qemu_uri).await;
                let p = up.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
                let v = up.storage_vol_lookup_by_name(&p, &name).await.unwrap();
                let file = tokio::fs::File::open(&src).await.unwrap();
                up.storage_vol_upload(&v, 0, UPLOAD, StorageVolStreamFlags::empty(), file)
                    .await
                    .unwrap();
                up.close().await;
                t_ours = t0.elapsed();
                let (cpu1, flt1) = cpu_and_faults();
                eprintln!(
                    "  (ours: {:.2} s CPU, {} minor faults)",
                    cpu1 - cpu0,
                    flt1 - flt0
                );
                rss_growth = rss_growth.max(status_kib("VmHWM:").saturating_sub(base));
                c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
                    .await
                    .unwrap();
            }
        }
        ours.push(mib_s(UPLOAD, t_ours));
        theirs.push(mib_s(UPLOAD, t_theirs));
        ratios.push(t_theirs.as_secs_f64() / t_ours.as_secs_f64());
        ideal.push(mib_s(UPLOAD, t_ideal));
        of_ideal.push(t_ideal.as_secs_f64() / t_ours.as_secs_f64());
        virsh_of_ideal.push(t_ideal.as_secs_f64() / t_theirs.as_secs_f64());
        eprintln!(
            "  round {round}: libvirt-rpc {:.0} MiB/s, virsh {:.0} MiB/s, ratio {:.2}; ideal client {:.0} MiB/s",
            ours[round], theirs[round], ratios[round], ideal[round]
        );
    }
    eprintln!("upload: load average after {}", loadavg());
    println!(
        "upload 256 MiB, medians of {rounds} interleaved rounds: libvirt-rpc {:.0} MiB/s, virsh vol-upload {:.0} MiB/s, ratio {:.2}x (median of per-round ratios; best-of ratio {:.2}x)",
        median(&ours),
        median(&theirs),
        median(&ratios),
        ours.iter().copied().fold(0.0, f64::max) / theirs.iter().copied().fold(0.0, f64::max)
    );
    println!(
        "the daemon's ceiling (an ideal client: prebuilt packets, one write): {:.0} MiB/s; libvirt-rpc reaches {:.2}x of it, virsh {:.2}x (medians of per-round ratios), so no client can be more than {:.2}x virsh here",
        median(&ideal),
        median(&of_ideal),
        median(&virsh_of_ideal),
        1.0 / median(&virsh_of_ideal)
    );
    println!(
        "peak RSS growth during the 256 MiB upload: {:.1} MiB (goal <= 32 MiB)",
        rss_growth as f64 / 1024.0
    );
    c.close().await;
}

const PY: &str = r#"
import libvirt, os, sys, threading, time
uri, n, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if os.environ.get("LVRPC_C_KEEPALIVE"):
    # Like virsh: an event loop thread and keepalive 5 s x 5, as ours has.
    libvirt.virEventRegisterDefaultImpl()
    def loop():
        while True:
            libvirt.virEventRunDefaultImpl()
    threading.Thread(target=loop, daemon=True).start()
conn = libvirt.open(uri)
if os.environ.get("LVRPC_C_KEEPALIVE"):
    conn.setKeepAlive(5, 5)
conn.getLibVersion()
per = n // threads
def work():
    for _ in range(per):
        conn.getLibVersion()
ts = [threading.Thread(target=work) for _ in range(threads)]
t0, c0 = time.perf_counter(), time.process_time()
for t in ts: t.start()
for t in ts: t.join()
t1, c1 = time.perf_counter(), time.process_time()
print(per * threads / (t1 - t0), (c1 - c0) * 1e6 / (per * threads))
"#;

/// (calls per second, CPU µs per call of the whole process, Python included)
/// of the C client through python3-libvirt.
fn python_rate(d: &Descriptor, n: usize, threads: usize) -> (f64, f64) {
    let text = testkit::run::stdout(Command::new("/usr/bin/python3").args([
        "-c",
        PY,
        &d.virsh_uri(&d.libvirt.test_uri),
        &n.to_string(),
        &threads.to_string(),
    ]));
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().unwrap());
    (fields.next().unwrap(), fields.next().unwrap())
}

async fn our_rate(c: &Client, n: usize, tasks: usize) -> f64 {
    let c = c.clone();
    concurrent_rate(tasks, n / tasks, move || {
        let c = c.clone();
        async move {
            c.connect_get_lib_version().await.unwrap();
        }
    })
    .await
}

/// A connection opened without the keepalive probe, so libvirtd runs no
/// keepalive timer for it (like a C client without an event loop) and we
/// send no PINGs on it; diagnostic only (`LVRPC_COMPARE_NO_KEEPALIVE`).
async fn connect_without_keepalive(d: &Descriptor, uri: &str) -> Client {
    let s = tokio::net::UnixStream::connect(&d.libvirt.socket)
        .await
        .unwrap();
    let c = Client::new(s, config());
    c.auth_list().await.unwrap();
    c.connect_open(Some(uri), OpenFlags::empty()).await.unwrap();
    c
}

async fn call_bench(d: &Descriptor) {
    let c = connect(d, &d.libvirt.test_uri).await;
    c.connect_get_lib_version().await.unwrap();
    let noka = match std::env::var_os("LVRPC_COMPARE_NO_KEEPALIVE") {
        Some(_) => Some(connect_without_keepalive(d, &d.libvirt.test_uri).await),
        None => None,
    };
    let rounds = std::env::var("LVRPC_CALL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CALL_ROUNDS);
    for (label, n, k) in [
        ("sequential", SEQ_CALLS, 1),
        ("16 concurrent", CONC_CALLS, THREADS),
    ] {
        eprintln!("{label}: load average before {}", loadavg());
        let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut d_ours, mut d_theirs) = (Vec::new(), Vec::new());
        let (mut cpu_ours, mut cpu_theirs) = (Vec::new(), Vec::new());
        let mut noka_ratios = Vec::new();
        for round in 0..rounds {
            let (mut r_ours, mut r_theirs) = (0.0, 0.0);
            if let Some(noka) = &noka {
                let r = our_rate(noka, n, k).await;
                eprintln!("  round {round}: libvirt-rpc without keepalive {r:.0}/s");
                noka_ratios.push(r);
            }
            // The side that goes first alternates.
            for side in [round % 2, 1 - round % 2] {
                let d0 = daemon_cpu(d);
                if side == 0 {
                    let (cpu0, _) = cpu_and_faults();
                    r_ours = our_rate(&c, n, k).await;
                    let (cpu1, _) = cpu_and_faults();
                    d_ours.push((daemon_cpu(d) - d0) * 1e6 / n as f64);
                    cpu_ours.push((cpu1 - cpu0) * 1e6 / n as f64);
                    eprintln!(
                        "  round {round}: libvirt-rpc {r_ours:.0}/s, {:.1} µs CPU/call",
                        (cpu1 - cpu0) * 1e6 / n as f64
                    );
                } else {
                    let cpu;
                    (r_theirs, cpu) = python_rate(d, n, k);
                    d_theirs.push((daemon_cpu(d) - d0) * 1e6 / n as f64);
                    cpu_theirs.push(cpu);
                    eprintln!("  round {round}: C client {r_theirs:.0}/s, {cpu:.1} µs CPU/call");
                }
            }
            ours.push(r_ours);
            theirs.push(r_theirs);
            ratios.push(r_ours / r_theirs);
            if let Some(r) = noka_ratios.last_mut() {
                *r /= r_theirs;
            }
        }
        if noka.is_some() {
            println!(
                "  (diagnostic) {label}: libvirt-rpc with libvirtd's keepalive off vs the C client: ratio {:.2}x (median of per-round ratios)",
                median(&noka_ratios)
            );
        }
        println!(
            "  {label}: client CPU per call (medians, whole process): libvirt-rpc {:.1} µs, C client {:.1} µs (python3-libvirt: Python included)",
            median(&cpu_ours),
            median(&cpu_theirs)
        );
        eprintln!(
            "{label}: load average after {}; daemon CPU per call (medians, includes other clients of the shared daemon): {:.1} µs serving us, {:.1} µs serving the C client",
            loadavg(),
            median(&d_ours),
            median(&d_theirs)
        );
        println!(
            "call rate {label}, medians of {rounds} interleaved rounds: libvirt-rpc {:.0}/s, C client (python3-libvirt, {k} thread(s)) {:.0}/s, ratio {}",
            median(&ours),
            median(&theirs),
            ratio_summary(&ratios)
        );
    }
    if let Some(noka) = noka {
        noka.close().await;
    }
    c.close().await;
}

const PY_EVENTS: &str = r#"
import libvirt, sys, threading, time
uri, n, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3]
libvirt.virEventRegisterDefaultImpl()
conn = libvirt.open(uri)
count = 0
done = threading.Event()
def on_event(conn, dom, event, detail, opaque):
    global count
    if dom.name().startswith(prefix):
        count += 1
        if count == n:
            done.set()
conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, on_event, None)
def loop():
    while not done.is_set():
        libvirt.virEventRunDefaultImpl()
t = threading.Thread(target=loop, daemon=True)
t.start()
c0 = time.process_time()
print("ready", flush=True)
done.wait()
print("done", time.process_time() - c0, flush=True)
sys.stdin.readline()
conn.close()
"#;

/// The environment variable that makes this binary our event receiver
/// (see [`our_receiver`]).
const RECEIVER_ENV: &str = "LVRPC_EVENT_RECEIVER";

/// Our side of the event benchmark, in a process of its own like
/// python's: a current-thread runtime (python runs one event-loop thread),
/// one connection, a lifecycle subscription; prints `ready`, then `done
/// <CPU seconds since ready>` once `n` events of domains named `prefix...`
/// arrived, then waits for a line on stdin.
fn our_receiver(args: &str) {
    let mut it = args.split('\t');
    let (socket, uri, n, prefix) = (
        it.next().unwrap(),
        it.next().unwrap(),
        it.next().unwrap().parse::<usize>().unwrap(),
        it.next().unwrap(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = Client::connect_unix(socket, uri, OpenFlags::empty(), config().event_queue(n * 2))
            .await
            .unwrap();
        let mut sub = c.subscribe_lifecycle(None).await.unwrap();
        let (cpu0, _) = cpu_and_faults();
        println!("ready");
        let mut count = 0;
        while count < n {
            let ev = sub.recv().await.expect("subscription open");
            if ev.dom.name.starts_with(prefix) {
                count += 1;
            }
        }
        assert_eq!(sub.missed(), 0, "events dropped");
        println!("done {}", cpu_and_faults().0 - cpu0);
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        c.close().await;
    });
}

/// The generator: `EVENTS / 2` suspend/resume pairs over the domains, one
/// task per domain. Returns when the last call is answered.
async fn generate(c: &Client, doms: &[Domain]) {
    let pairs = EVENTS / 2 / doms.len();
    let tasks: Vec<_> = doms
        .iter()
        .map(|d| {
            let (c, d) = (c.clone(), d.clone());
            tokio::spawn(async move {
                for _ in 0..pairs {
                    c.domain_suspend(&d).await.unwrap();
                    c.domain_resume(&d).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
}

/// What one receiver round measured.
struct EventRound {
    /// Generator start to the burst's last event received.
    seconds: f64,
    /// The last event's receipt after the generator's last call.
    lag: f64,
    /// The receiver process's CPU seconds per event.
    cpu_per_event: f64,
}

/// Runs `receiver` (a process that prints `ready`, then `done <CPU
/// seconds>` once it has the whole burst), generates the burst, and times
/// it.
async fn event_round(
    mut receiver: tokio::process::Command,
    generator: &Client,
    doms: &[Domain],
) -> EventRound {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = receiver
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("receiver ready within 60 s")
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));
    let t0 = Instant::now();
    let done = tokio::spawn(async move {
        let line = lines.next_line().await.unwrap().unwrap_or_default();
        (Instant::now(), line)
    });
    generate(generator, doms).await;
    let generated = Instant::now();
    let (last, line) = tokio::time::timeout(Duration::from_secs(120), done)
        .await
        .expect("the burst within 120 s")
        .unwrap();
    let cpu: f64 = line
        .strip_prefix("done ")
        .unwrap_or_else(|| panic!("receiver said {line:?}"))
        .trim()
        .parse()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"bye\n").await.unwrap();
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("receiver exits")
        .unwrap();
    assert!(status.success());
    EventRound {
        seconds: (last - t0).as_secs_f64(),
        lag: last.saturating_duration_since(generated).as_secs_f64(),
        cpu_per_event: cpu / EVENTS as f64,
    }
}

async fn event_bench(d: &Descriptor) {
    let generator = connect(d, &d.libvirt.test_uri).await;
    let prefix = format!("lvrpc-bench-ev-{}-", std::process::id());
    let mut doms = Vec::new();
    for i in 0..EVENT_DOMAINS {
        let xml = format!(
            "<domain type='test'><name>{prefix}{i}</name><memory unit='KiB'>65536</memory>\
             <os><type arch='x86_64'>hvm</type></os></domain>"
        );
        // REMOTE_PROC_DOMAIN_CREATE_XML = 10: a transient, running domain.
        let dom: Domain = generator.call(10, &(xml.as_str(), 0u32)).await.unwrap();
        doms.push(dom);
    }
    let rounds = std::env::var("LVRPC_EVENT_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(EVENT_ROUNDS);
    let uri = d.virsh_uri(&d.libvirt.test_uri);
    let ours_cmd = || {
        let mut c = tokio::process::Command::new(std::env::current_exe().unwrap());
        c.env(
            RECEIVER_ENV,
            format!(
                "{}\t{}\t{EVENTS}\t{prefix}",
                d.libvirt.socket.display(),
                d.libvirt.test_uri
            ),
        );
        c
    };
    let python_cmd = || {
        let mut c = tokio::process::Command::new("/usr/bin/python3");
        c.args(["-c", PY_EVENTS, &uri, &EVENTS.to_string(), &prefix]);
        c
    };
    // Warm-up: one burst with no receiver (the generator alone).
    let t0 = Instant::now();
    generate(&generator, &doms).await;
    let alone = EVENTS as f64 / t0.elapsed().as_secs_f64();
    eprintln!(
        "events: load average before {}; generator alone {alone:.0} events/s",
        loadavg()
    );
    let (mut ours, mut theirs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut lag_ours, mut lag_theirs) = (Vec::new(), Vec::new());
    let (mut cpu_ours, mut cpu_theirs) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let (mut t_ours, mut t_theirs) = (0.0, 0.0);
        for side in [round % 2, 1 - round % 2] {
            let (label, r) = if side == 0 {
                (
                    "libvirt-rpc",
                    event_round(ours_cmd(), &generator, &doms).await,
                )
            } else {
                (
                    "python3-libvirt",
                    event_round(python_cmd(), &generator, &doms).await,
                )
            };
            eprintln!(
                "  round {round}: {label} {:.0} events/s, lag {:.1} ms, {:.1} µs CPU/event",
                EVENTS as f64 / r.seconds,
                r.lag * 1e3,
                r.cpu_per_event * 1e6
            );
            if side == 0 {
                t_ours = r.seconds;
                lag_ours.push(r.lag * 1e3);
                cpu_ours.push(r.cpu_per_event * 1e6);
            } else {
                t_theirs = r.seconds;
                lag_theirs.push(r.lag * 1e3);
                cpu_theirs.push(r.cpu_per_event * 1e6);
            }
        }
        ours.push(EVENTS as f64 / t_ours);
        theirs.push(EVENTS as f64 / t_theirs);
        ratios.push(t_theirs / t_ours);
    }
    eprintln!("events: load average after {}", loadavg());
    for dom in &doms {
        let _ = generator.domain_destroy(dom).await;
    }
    generator.close().await;
    println!(
        "  event receivers, CPU per event (medians, whole receiver process): libvirt-rpc {:.1} µs, python3-libvirt {:.1} µs (Python included); lag after the generator's last call: {:.1} ms vs {:.1} ms; generator alone {alone:.0} events/s",
        median(&cpu_ours),
        median(&cpu_theirs),
        median(&lag_ours),
        median(&lag_theirs),
    );
    println!(
        "event delivery, burst of {EVENTS} lifecycle events, medians of {rounds} interleaved rounds: libvirt-rpc {:.0} events/s, python3-libvirt event loop {:.0} events/s, ratio {}",
        median(&ours),
        median(&theirs),
        ratio_summary(&ratios),
    );
}

fn main() {
    if let Ok(args) = std::env::var(RECEIVER_ENV) {
        our_receiver(&args);
        return;
    }
    let d = Descriptor::require();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(
            std::env::var("LVRPC_WORKERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(2),
        )
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let only = |name: &str| std::env::var_os(name).is_some();
        let (calls, upload, events) = (
            only("LVRPC_CALLS_ONLY"),
            only("LVRPC_UPLOAD_ONLY"),
            only("LVRPC_EVENTS_ONLY"),
        );
        let all = !calls && !upload && !events;
        if all || calls {
            call_bench(&d).await;
        }
        if all || upload {
            upload_bench(&d).await;
        }
        if all || events {
            event_bench(&d).await;
        }
    });
}

//! fleet stays free of IO and clocks (ARCHITECTURE.md's boundaries): no
//! source file under `src/` names a socket, a file, a thread, a process,
//! the environment or a clock reading, and no IO runtime is a dependency.
//! The operator owns all of those (its `probe.rs` is the CONNECT probe's
//! socket and clock) and hands fleet bytes, errors and clock readings.
//!
//! Comment lines are not scanned: docs (and their examples) may name what
//! the code must not use.

use std::path::{Path, PathBuf};

/// What IO or a clock reading looks like in source.
const FORBIDDEN: &[&str] = &[
    "tokio",
    "async-std",
    "async_std",
    "mio::",
    "socket2",
    "std::net::Tcp",
    "std::net::Udp",
    "TcpStream",
    "TcpListener",
    "UdpSocket",
    "UnixStream",
    "UnixListener",
    "std::fs",
    "std::thread",
    "std::process",
    "std::env",
    "Instant::now",
    "SystemTime::now",
];

/// Crates that would bring IO or a runtime into fleet.
const FORBIDDEN_DEPENDENCIES: &[&str] = &[
    "tokio",
    "tokio-util",
    "async-std",
    "mio",
    "socket2",
    "hyper",
    "reqwest",
    "kube",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every forbidden use in `text` (the file at `path`), as `path:line: what`.
fn offences(path: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim_start().starts_with("//"))
        .flat_map(|(n, line)| {
            FORBIDDEN
                .iter()
                .filter(|f| line.contains(*f))
                .map(move |f| format!("{}:{}: {f}", path.display(), n + 1))
        })
        .collect()
}

#[test]
fn no_source_file_uses_io_or_reads_a_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 10,
        "found only {files:?} under {}",
        src.display()
    );
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| offences(f, &std::fs::read_to_string(f).unwrap()))
        .collect();
    assert!(
        found.is_empty(),
        "fleet is sans IO (move sockets, files and clock readings to the operator):\n{}",
        found.join("\n")
    );
}

#[test]
fn no_dependency_brings_io() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let mut section = "";
    let mut found = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        let name = line.split(['=', ' ', '.']).next().unwrap_or_default();
        if section.contains("dependencies") && FORBIDDEN_DEPENDENCIES.contains(&name) {
            found.push(format!("{section} {name}"));
        }
    }
    assert!(found.is_empty(), "fleet depends on IO: {found:?}");
}

#[test]
fn the_scan_sees_what_it_forbids() {
    let p = Path::new("src/x.rs");
    let hits = offences(
        p,
        "use std::time::Instant;\n// Instant::now() in a comment\nlet t = Instant::now();\n",
    );
    assert_eq!(hits, ["src/x.rs:3: Instant::now"]);
    assert_eq!(
        offences(p, "use tokio::net::TcpStream;"),
        ["src/x.rs:1: tokio", "src/x.rs:1: TcpStream"]
    );
    assert!(offences(p, "use std::net::{IpAddr, SocketAddr};").is_empty());
}

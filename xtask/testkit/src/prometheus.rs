//! A real Prometheus (Debian's, installed by `cargo xtask setup`) scraping
//! one target every second with a bearer token, evaluating the shipped
//! alert rules, and its HTTP API for queries: for tests that what the
//! operator serves is what the dashboard and the alerts read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running Prometheus; killed with its process group when dropped.
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts Prometheus on a free loopback port, scraping `target`
    /// (`host:port`, path `/metrics`) every second with `token` and
    /// labelling its series `pod="op-0"`, with `rules` (a rules file)
    /// loaded; returns once it is ready (within 60 s, or panics with its
    /// log).
    pub fn start(target: &str, token: &str, rules: &Path) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token).unwrap();
        let config = format!(
            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
             rule_files: [{rules:?}]\n\
             scrape_configs:\n\
             \x20 - job_name: egress-proxies-operator\n\
             \x20   authorization: {{credentials_file: {token_file:?}}}\n\
             \x20   static_configs: [{{targets: [{target:?}], labels: {{pod: op-0}}}}]\n",
            rules = rules.display().to_string(),
            token_file = token_file.display().to_string(),
        );
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port()));
        let child = std::os::unix::process::CommandExt::process_group(
            &mut Command::new("/usr/bin/prometheus"),
            0,
        )
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
        .spawn()
        .expect("prometheus starts (cargo xtask setup installs it)");
        let p = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while p.http_get("/-/ready").0 != 200 {
            assert!(
                Instant::now() < deadline,
                "prometheus on {addr} not ready within 60 s:\n{}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// Its log, for a failure message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// `GET path` on its HTTP API: status and body (`(0, "")` when it does
    /// not answer).
    pub fn http_get(&self, path: &str) -> (u16, String) {
        let Ok(mut s) = TcpStream::connect_timeout(&self.addr, Duration::from_secs(2)) else {
            return (0, String::new());
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        // HTTP/1.0: the body ends with the connection, never chunked.
        let request = format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
        if s.write_all(request.as_bytes()).is_err() {
            return (0, String::new());
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        let code = answer
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = answer
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        (code, body)
    }

    /// The result vector of the instant query `expr` (panics unless the
    /// query succeeds).
    pub fn query(&self, expr: &str) -> Vec<serde_json::Value> {
        let (code, body) = self.http_get(&format!("/api/v1/query?query={}", encode(expr)));
        assert_eq!(code, 200, "query {expr}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// Every loaded rule: `(name, health, last error)`.
    pub fn rules(&self) -> Vec<(String, String, String)> {
        let (code, body) = self.http_get("/api/v1/rules");
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or_default().to_owned();
        v["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| (text(&r, "name"), text(&r, "health"), text(&r, "lastError")))
            .collect()
    }
}

/// Percent-encodes a query parameter's value.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

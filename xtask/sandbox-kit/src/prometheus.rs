//! A real Prometheus (Debian's, installed by `cargo xtask setup`) scraping
//! one target every second with a bearer token, evaluating the shipped
//! alert rules, and its HTTP API for queries: for the tests and the demo
//! row that check that what the operator serves is what the dashboard and
//! the alerts read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

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
    /// loaded; returns once it is ready.
    ///
    /// # Errors
    /// When it cannot be started or is not ready within 60 s (with its
    /// log).
    pub fn start(target: &str, token: &str, rules: &Path) -> Result<Prometheus> {
        let dir = tempfile::tempdir()?;
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token)?;
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
        std::fs::write(dir.path().join("prometheus.yml"), config)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], crate::free_port()?));
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
        .stderr(std::fs::File::create(dir.path().join("stderr.log"))?)
        .spawn()
        .context("start /usr/bin/prometheus (cargo xtask setup installs it)")?;
        let p = Prometheus { child, addr, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        while p.http_get("/-/ready").0 != 200 {
            if Instant::now() >= deadline {
                bail!("prometheus on {addr} not ready within 60 s:\n{}", p.log());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(p)
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

    /// The result vector of the instant query `expr`.
    ///
    /// # Errors
    /// When the query is refused or the answer is not Prometheus' JSON.
    pub fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>> {
        let (code, body) = self.http_get(&format!("/api/v1/query?query={}", encode(expr)));
        if code != 200 {
            bail!("query {expr}: {code} {body}");
        }
        let v: serde_json::Value = serde_json::from_str(&body)?;
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// Every loaded rule: `(name, health, last error)`.
    ///
    /// # Errors
    /// When the rules API answers otherwise than 200 with JSON.
    pub fn rules(&self) -> Result<Vec<(String, String, String)>> {
        let (code, body) = self.http_get("/api/v1/rules");
        if code != 200 {
            bail!("rules: {code} {body}");
        }
        let v: serde_json::Value = serde_json::from_str(&body)?;
        let text = |r: &serde_json::Value, k: &str| r[k].as_str().unwrap_or_default().to_owned();
        Ok(v["data"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .map(|r| (text(&r, "name"), text(&r, "health"), text(&r, "lastError")))
            .collect())
    }

    /// Polls `expr` until it returns data, for at most `within`: the result
    /// (empty when none came; a failing query counts as no data).
    pub fn wait_data(&self, expr: &str, within: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + within;
        loop {
            let result = self.query(expr).unwrap_or_default();
            if !result.is_empty() || Instant::now() >= deadline {
                return result;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The loaded rules once each was evaluated (no `unknown` health), or
    /// as they are when `within` passes.
    pub fn evaluated_rules(&self, within: Duration) -> Vec<(String, String, String)> {
        let deadline = Instant::now() + within;
        loop {
            let r = self.rules().unwrap_or_default();
            let done = !r.is_empty() && r.iter().all(|(_, health, _)| health != "unknown");
            if done || Instant::now() >= deadline {
                return r;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Every panel's query expression in the Grafana dashboard at `path`
/// (none when it cannot be read).
pub fn dashboard_exprs(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    dashboard["panels"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect()
}

/// The `egress_proxies_*` series names a rules file reads, sorted, once
/// each.
pub fn rule_series(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut names: Vec<String> = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("egress_proxies_"))
        .map(str::to_owned)
        .collect();
    names.sort_unstable();
    names.dedup();
    names
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

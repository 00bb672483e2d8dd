//! What the demo drives: the sandbox's API server (through kubectl), its
//! libvirtd (through virsh) and the operator (deploy/'s pod, or a local
//! process).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::pod::Deployment;
use super::target::{Identity, Target};
use crate::util::{cmd, read};

/// Where the operator's Lease and ServiceAccount live (deploy/).
pub const OPERATOR_NS: &str = "egress-proxies-system";
const SA: &str = "egress-proxies-operator";
/// The discovery consumer of deploy/samples/discovery-reader.yaml (in the
/// run's namespace).
const CONSUMER: &str = "proxy-consumer";

/// The suite's view of its target.
pub struct World {
    pub target: Target,
    /// The run's files: providers config, kubeconfig, operator log.
    pub dir: PathBuf,
    /// The namespace the run's Proxies live in.
    pub ns: String,
    /// The provider entry.
    pub entry: String,
    config: PathBuf,
    kubeconfig: PathBuf,
    runner: Runner,
    log: PathBuf,
    /// Log lines before the current operator process started.
    log_mark: usize,
}

/// How the operator runs.
pub enum Runner {
    /// A local process of this binary, as the target's identity.
    Process {
        /// The operator binary.
        bin: PathBuf,
        /// The process, while it runs.
        child: Option<Child>,
    },
    /// deploy/'s Deployment on the sandbox's node.
    Pod(Deployment),
}

impl World {
    /// Writes the target's providers config into `dir`.
    pub fn new(target: Target, dir: PathBuf, runner: Runner) -> Result<World> {
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let config = dir.join("providers.yaml");
        std::fs::write(&config, target.config_yaml())?;
        let kubeconfig = match &target.identity {
            Identity::ServiceAccount(_) => dir.join("operator.kubeconfig"),
            Identity::Kubeconfig(k) => k.clone(),
        };
        let log = dir.join("operator.log");
        // A new run, a new log (the rows read it from the start).
        let _ = std::fs::remove_file(&log);
        Ok(World {
            ns: target.tag.clone(),
            entry: target.entry.clone(),
            target,
            config,
            kubeconfig,
            runner,
            log,
            log_mark: 0,
            dir,
        })
    }

    /// The API server's minor version (`1.20` → 20).
    fn server_minor(&self) -> Result<u32> {
        let v: Value = serde_json::from_str(&self.kubectl(&["version", "-o", "json"])?)?;
        let minor = v["serverVersion"]["minor"]
            .as_str()
            .context("kubectl version names no server minor version")?;
        minor
            .trim_end_matches('+')
            .parse()
            .with_context(|| format!("server minor version {minor:?}"))
    }

    /// deploy/ as docs/operator.md installs it: the CRDs (`deploy/crds/`,
    /// or `deploy/crds-without-cel/` on servers older than 1.25), the
    /// operator's namespace, `kubectl apply -k deploy/` (with the pod: the
    /// overlay over it, and the SSH Secret); then the CRDs established, the
    /// run's namespace, the ServiceAccount's token, the discovery consumer
    /// (deploy/samples/discovery-reader.yaml in the run's namespace).
    pub fn install(&self, deploy: &Path) -> Result<()> {
        let crds = if self.server_minor()? >= 25 {
            "crds"
        } else {
            "crds-without-cel"
        };
        self.kubectl(&["apply", "-k", &deploy.join(crds).to_string_lossy()])?;
        if self.kubectl(&["get", "namespace", OPERATOR_NS]).is_err() {
            self.kubectl(&["create", "namespace", OPERATOR_NS])?;
        }
        match &self.runner {
            Runner::Pod(d) => d.install(&self.target)?,
            Runner::Process { .. } => {
                self.kubectl(&["apply", "-k", &deploy.to_string_lossy()])?;
            }
        }
        for crd in [
            "proxies.egress-proxies.io",
            "providerhealths.egress-proxies.io",
        ] {
            let crd = format!("crd/{crd}");
            self.kubectl(&["wait", "--for=condition=Established", "--timeout=60s", &crd])?;
        }
        if self.kubectl(&["get", "namespace", &self.ns]).is_err() {
            self.kubectl(&["create", "namespace", &self.ns])?;
        }
        // Discovery needs a token: a consumer as the docs make one.
        let sample = std::fs::read_to_string(deploy.join("samples/discovery-reader.yaml"))
            .context("read deploy/samples/discovery-reader.yaml")?;
        let consumer = self.dir.join("discovery-reader.yaml");
        std::fs::write(
            &consumer,
            sample.replace("namespace: team-a", &format!("namespace: {}", self.ns)),
        )?;
        self.kubectl(&["apply", "-f", &consumer.to_string_lossy()])?;
        if let Identity::ServiceAccount(kube) = &self.target.identity {
            let sa = kube.service_account_kubeconfig(OPERATOR_NS, SA)?;
            std::fs::write(&self.kubeconfig, sa)?;
        }
        Ok(())
    }

    /// kubectl as the administrator.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        let mut c = cmd("kubectl", ["--kubeconfig"]);
        c.arg(&self.target.admin_kubeconfig).args(args);
        read(c)
    }

    /// The kubeconfig kubectl uses.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.target.admin_kubeconfig
    }

    /// `kubectl get ... -o json`.
    pub fn get_json(&self, args: &[&str]) -> Result<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        Ok(serde_json::from_str(&self.kubectl(&all)?)?)
    }

    /// Applies Proxies of these names on the run's provider entry.
    pub fn apply_proxies(&self, names: &[&str]) -> Result<()> {
        let manifest = self.dir.join("proxies.yaml");
        let mut yaml = String::new();
        for name in names {
            yaml.push_str(&format!(
                "apiVersion: egress-proxies.io/v1alpha1\nkind: Proxy\nmetadata:\n  name: {name}\n  namespace: {}\nspec:\n  provider: {}\n---\n",
                self.ns, self.entry
            ));
        }
        std::fs::write(&manifest, yaml)?;
        self.kubectl(&["apply", "-f", &manifest.to_string_lossy()])?;
        Ok(())
    }

    /// The demo's Proxies (items of the list).
    pub fn proxies(&self) -> Result<Vec<Value>> {
        let list = self.get_json(&["-n", &self.ns, "get", "proxies"])?;
        Ok(list["items"].as_array().cloned().unwrap_or_default())
    }

    /// One Proxy.
    pub fn proxy(&self, name: &str) -> Result<Value> {
        self.get_json(&["-n", &self.ns, "get", "proxy", name])
    }

    /// virsh on the target host.
    pub fn virsh(&self, args: &[&str]) -> Result<String> {
        let mut c = cmd("virsh", ["-c", self.target.virsh_uri.as_str()]);
        c.args(args);
        read(c)
    }

    /// Every domain name on the host.
    pub fn domains(&self) -> Result<Vec<String>> {
        Ok(self
            .virsh(&["list", "--all", "--name"])?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect())
    }

    /// Every volume name in the target's pool.
    pub fn volumes(&self) -> Result<Vec<String>> {
        Ok(self
            .virsh(&["vol-list", &self.target.pool])?
            .lines()
            .skip(2)
            .filter_map(|l| l.split_whitespace().next())
            .map(str::to_owned)
            .collect())
    }

    /// Starts the operator (scales the Deployment to one pod, or starts the
    /// local process under the target's identity, its JSON log going to
    /// `operator.log`) and waits until it leads.
    pub fn start_operator(&mut self) -> Result<()> {
        match &mut self.runner {
            Runner::Pod(d) => {
                if d.pod.is_some() {
                    bail!("the operator is running already");
                }
                d.start()?;
            }
            Runner::Process { bin, child } => {
                if child.is_some() {
                    bail!("the operator is running already");
                }
                self.log_mark = log_file_lines(&self.log).len();
                *child = Some(spawn_process(
                    bin,
                    &self.target,
                    &self.config,
                    &self.kubeconfig,
                    &self.ns,
                    &self.log,
                )?);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        while !self
            .since_start()
            .iter()
            .any(|l| message(l) == "leadership acquired")
        {
            if let Runner::Process { child, .. } = &mut self.runner
                && let Some(status) = child.as_mut().and_then(|c| c.try_wait().ok().flatten())
            {
                *child = None;
                bail!(
                    "the operator exited ({status}); its log: {}",
                    self.log.display()
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the operator did not lead within 90 s; its log: {}",
                    self.log_path().display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Stops the operator: scales the Deployment to zero (the pod's log is
    /// kept in `operator.log` first), or SIGTERM to the process and at most
    /// 30 s for it to exit (then SIGKILL). Returns how long it took.
    pub fn stop_operator(&mut self) -> Result<Duration> {
        match &mut self.runner {
            Runner::Pod(d) => {
                if d.pod.is_none() {
                    return Ok(Duration::ZERO);
                }
                let log = d.log();
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.log)?;
                std::io::Write::write_all(&mut file, log.as_bytes())?;
                d.stop()
            }
            Runner::Process { child, .. } => {
                let Some(mut child) = child.take() else {
                    return Ok(Duration::ZERO);
                };
                let started = Instant::now();
                let _ = Command::new("kill")
                    .args(["-TERM", &child.id().to_string()])
                    .status();
                while started.elapsed() < Duration::from_secs(30) {
                    if child.try_wait()?.is_some() {
                        return Ok(started.elapsed());
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
                bail!("the operator did not exit within 30 s of SIGTERM")
            }
        }
    }

    /// What runs the operator now: `pod NAME` or `pid N`.
    pub fn operator_label(&self) -> Option<String> {
        match &self.runner {
            Runner::Pod(d) => d.pod.as_ref().map(|p| format!("pod {OPERATOR_NS}/{p}")),
            Runner::Process { child, .. } => child.as_ref().map(|c| format!("pid {}", c.id())),
        }
    }

    /// Whether the operator runs as deploy/'s pod.
    pub fn in_pod(&self) -> bool {
        matches!(self.runner, Runner::Pod(_))
    }

    /// Every JSON line the operator logged (all its runs).
    pub fn log_lines(&self) -> Vec<Value> {
        let mut lines = log_file_lines(&self.log);
        if let Runner::Pod(d) = &self.runner {
            lines.extend(json_lines(&d.log()));
        }
        lines
    }

    /// The lines of the current run.
    pub fn since_start(&self) -> Vec<Value> {
        match &self.runner {
            Runner::Pod(d) => json_lines(&d.log()),
            Runner::Process { .. } => log_file_lines(&self.log).split_off(self.log_mark),
        }
    }

    /// The operator's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The current run's HTTP address (`/proxies`, `/metrics`).
    pub fn http_addr(&self) -> Option<String> {
        self.since_start()
            .iter()
            .find(|l| message(l) == "http listening")
            .and_then(|l| l["fields"]["addr"].as_str().map(str::to_owned))
    }

    /// `GET http://<operator>/PATH` as JSON, with the discovery consumer's
    /// bearer token (a fresh one, written to [`World::token_header`]).
    pub fn discovery(&self, path_and_query: &str) -> Result<Value> {
        let addr = self
            .http_addr()
            .context("the operator logged no HTTP address")?;
        let header = self.token_header()?;
        let body = read(cmd(
            "curl",
            [
                "-sf",
                "--max-time",
                "5",
                // From a file: a command line is printed in errors, and
                // other users see it in ps.
                "-H",
                &format!("@{}", header.display()),
                &format!("http://{addr}{path_and_query}"),
            ],
        ))?;
        Ok(serde_json::from_str(&body)?)
    }

    /// Writes `Authorization: Bearer <token>` for the discovery consumer
    /// (a token valid one hour) to a file only this user can read; its
    /// path (curl's `-H @FILE`).
    pub fn token_header(&self) -> Result<PathBuf> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let token =
            self.kubectl(&["-n", &self.ns, "create", "token", CONSUMER, "--duration=1h"])?;
        let path = self.dir.join("discovery-token.header");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .with_context(|| format!("write {}", path.display()))?;
        writeln!(file, "Authorization: Bearer {}", token.trim())?;
        Ok(path)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Err(e) = self.stop_operator() {
            eprintln!("demo: {e:#}");
        }
    }
}

fn log_file_lines(path: &Path) -> Vec<Value> {
    json_lines(&std::fs::read_to_string(path).unwrap_or_default())
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The operator as a local process, logging to `log`.
fn spawn_process(
    bin: &Path,
    t: &Target,
    config: &Path,
    kubeconfig: &Path,
    ns: &str,
    log: &Path,
) -> Result<Child> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut c = Command::new(bin);
    c.arg("run")
        .arg("--providers-config")
        .arg(config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--namespace", ns, "--cluster-id", &t.tag])
        .args(["--probe-target", &t.probe_target, "--probe-interval", "3s"])
        .args(["--check-interval", "10s", "--http-addr", "127.0.0.1:0"])
        .args(["--log", "info,kube=warn"]);
    if let Some(netns) = &t.probe_netns {
        c.args(["--probe-netns", netns]);
    }
    if let Identity::Kubeconfig(_) = t.identity {
        // The user's cluster may run the real operator: a Lease of our own.
        c.args(["--lease-namespace", ns, "--lease-name", &t.tag]);
    }
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .with_context(|| format!("start {}", bin.display()))
}

/// A log line's message.
pub fn message(line: &Value) -> &str {
    line["fields"]["message"].as_str().unwrap_or_default()
}

/// The domain name of a Proxy: its provider ID's last segment.
pub fn domain_of(proxy: &Value) -> Option<String> {
    let id = proxy["status"]["providerID"].as_str()?;
    id.rsplit('/').next().map(str::to_owned)
}

/// A Proxy's condition of type `t`.
pub fn condition<'a>(proxy: &'a Value, t: &str) -> Option<&'a Value> {
    proxy["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

/// Whether a Proxy is Running with `Healthy=True`.
pub fn serving(proxy: &Value) -> bool {
    proxy["status"]["phase"] == "Running"
        && condition(proxy, "Healthy").is_some_and(|c| c["status"] == "True")
        && current_instance(proxy).is_some_and(|i| proxy["status"]["probedInstance"] == i)
}

/// The instance a `Healthy` verdict must name to count
/// (`providerID#replacements@ip:port`, as `fleet::ProxyStatus` makes it).
pub fn current_instance(proxy: &Value) -> Option<String> {
    let s = &proxy["status"];
    let ip: std::net::IpAddr = s["ip"].as_str()?.parse().ok()?;
    let port = u16::try_from(s["port"].as_u64()?).ok()?;
    Some(format!(
        "{}#{}@{}",
        s["providerID"].as_str()?,
        s["replacements"].as_u64().unwrap_or(0),
        std::net::SocketAddr::new(ip, port)
    ))
}

//! The sandbox's Kubernetes control plane: etcd and kube-apiserver v1.20.2 on
//! loopback.
//!
//! - A sandbox CA (in `kube/` of the run directory) signs the API server's
//!   certificate (`127.0.0.1`, `localhost`, the in-cluster names) and an
//!   administrator's client certificate (group `system:masters`); the admin
//!   kubeconfig uses it.
//! - **RBAC authorization is on**: any other identity (a ServiceAccount's
//!   token from `kubectl create token`) gets exactly what its roles grant.
//! - Service-account tokens are signed with a fresh RSA key, so the
//!   `TokenRequest` API works.
//! - etcd keeps its data in `/dev/shm` (fast, and gone with `down`).
//!
//! - The Node authorizer and the NodeRestriction admission plugin are on,
//!   and the server holds a client certificate for kubelets, so the node
//!   [`crate::node`] adds (for the demo) works like a cluster's.
//!
//! Without that node there is no kube-controller-manager or kubelet: objects
//! are stored and watched, but namespaces are not finalised and Deployments
//! never run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use sandbox_kit::KubeService;
use sandbox_kit::kubeconfig::{self, Credentials};

use crate::setup::kube_build;
use crate::util::{cmd, output};
use crate::util::{free_port, wait_until_within};
use sandbox_kit::pki::{self, Usage};

/// How long the API server may take to answer `/readyz` (it runs its RBAC
/// bootstrap first; on a loaded 2-core machine that takes a while).
const APISERVER_READY: Duration = Duration::from_secs(90);
const ETCD_READY: Duration = Duration::from_secs(30);
/// Room for every Service the tests make: the sandbox runs no namespace
/// controller, so a deleted namespace keeps its Services (and their
/// cluster IPs) for the sandbox's life. A /24 filled up.
pub(crate) const SERVICE_RANGE: &str = "10.96.0.0/16";
/// Set (to anything) at `sandbox up`: the API server serves Go's profiler
/// at `/debug/pprof` (admin only), as `cargo xtask bench operator`'s
/// `OPERATOR_BENCH_PPROF` reads it.
pub const PROFILING_VAR: &str = "KVM2_SANDBOX_APISERVER_PROFILING";
const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The service-account signing key's file stem in `kube/` (`.key`, `.pub`).
pub const SERVICE_ACCOUNT_KEY: &str = "service-account";
/// The prefix of etcd's data directory in `/dev/shm`.
pub const ETCD_DATA_PREFIX: &str = "/dev/shm/kvm2-sandbox-etcd-";

/// Starts etcd and kube-apiserver; each started process is pushed onto
/// `started` (name as in `/proc/PID/comm`, pid) as soon as it runs, and
/// etcd's data directory onto `scratch`, so `down` can undo a partial start.
pub fn start(
    dir: &Path,
    started: &mut Vec<(String, u32)>,
    scratch: &mut Vec<PathBuf>,
) -> Result<KubeService> {
    let apiserver = kube_build::apiserver_path();
    anyhow::ensure!(
        apiserver.exists(),
        "kube-apiserver is not built: run `cargo xtask setup`"
    );
    let kube_dir = dir.join("kube");
    std::fs::create_dir_all(&kube_dir)?;

    let etcd_data = PathBuf::from(format!(
        "{ETCD_DATA_PREFIX}{}",
        dir.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    ));
    scratch.push(etcd_data.clone());
    let (client_port, peer_port) = (free_port()?, free_port()?);
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let mut etcd = Command::new("/usr/bin/etcd");
    etcd.arg("--name=kvm2-sandbox")
        .arg(format!("--data-dir={}", etcd_data.display()))
        .arg(format!("--listen-client-urls={etcd_url}"))
        .arg(format!("--advertise-client-urls={etcd_url}"))
        .arg(format!("--listen-peer-urls={peer_url}"))
        .arg(format!("--initial-advertise-peer-urls={peer_url}"))
        .arg(format!("--initial-cluster=kvm2-sandbox={peer_url}"))
        .arg("--log-outputs=stderr");
    started.push((
        "etcd".into(),
        spawn_logged(etcd, &kube_dir.join("etcd.log"))?,
    ));
    wait_until_within("etcd", ETCD_READY, || {
        Ok(output(cmd("curl", ["-sf", &format!("{etcd_url}/health")]))?
            .status
            .success())
    })?;

    let ca = pki::new_ca(&kube_dir, "kvm2-sandbox-ca")?;
    let serving = pki::issue(
        &ca,
        &kube_dir,
        "apiserver",
        "/CN=kube-apiserver",
        Usage::Server(&[
            "IP:127.0.0.1",
            "DNS:localhost",
            "IP:10.96.0.1",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]),
    )?;
    let admin = pki::issue(
        &ca,
        &kube_dir,
        "admin",
        "/O=system:masters/CN=kvm2-sandbox-admin",
        Usage::Client,
    )?;
    // The API server's identity towards kubelets (logs, exec).
    let kubelet_client = pki::issue(
        &ca,
        &kube_dir,
        "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client",
        Usage::Client,
    )?;
    let (sa_key, sa_pub) = pki::signing_keys(&kube_dir, SERVICE_ACCOUNT_KEY)?;

    let port = free_port()?;
    let server = format!("https://127.0.0.1:{port}");
    let mut api = Command::new(&apiserver);
    api.arg(format!("--etcd-servers={etcd_url}"))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        // Endpoints may not hold a loopback address; nothing here needs the
        // `kubernetes` Service's endpoints.
        .arg("--endpoint-reconciler-type=none")
        .arg(format!("--secure-port={port}"))
        .arg("--insecure-port=0")
        .arg(format!("--cert-dir={}", kube_dir.display()))
        .arg(format!("--tls-cert-file={}", serving.cert.display()))
        .arg(format!("--tls-private-key-file={}", serving.key.display()))
        .arg(format!("--client-ca-file={}", ca.cert.display()))
        .arg("--authorization-mode=Node,RBAC")
        .arg("--enable-admission-plugins=NodeRestriction")
        .arg(format!(
            "--kubelet-client-certificate={}",
            kubelet_client.cert.display()
        ))
        .arg(format!(
            "--kubelet-client-key={}",
            kubelet_client.key.display()
        ))
        .arg(format!(
            "--kubelet-certificate-authority={}",
            ca.cert.display()
        ))
        .arg("--kubelet-preferred-address-types=InternalIP")
        .arg("--anonymous-auth=false")
        .arg(format!("--service-account-issuer={ISSUER}"))
        .arg(format!("--service-account-key-file={}", sa_pub.display()))
        .arg(format!(
            "--service-account-signing-key-file={}",
            sa_key.display()
        ))
        .arg(format!("--service-cluster-ip-range={SERVICE_RANGE}"))
        .arg("--allow-privileged=true")
        // Off unless asked for: `/debug/pprof` (admin only) attributes the
        // API server's CPU when a benchmark needs it.
        .arg(format!(
            "--profiling={}",
            std::env::var_os(PROFILING_VAR).is_some()
        ));
    started.push((
        "kube-apiserver".into(),
        spawn_logged(api, &kube_dir.join("kube-apiserver.log"))?,
    ));

    let admin_kubeconfig = kube_dir.join("admin.kubeconfig");
    std::fs::write(
        &admin_kubeconfig,
        kubeconfig::render(
            &server,
            &ca.cert,
            "kvm2-sandbox-admin",
            Credentials::ClientCert {
                cert: &admin.cert,
                key: &admin.key,
            },
        ),
    )?;
    let readyz = format!("{server}/readyz");
    wait_until_within("kube-apiserver", APISERVER_READY, || {
        let out = output(cmd(
            "curl",
            [
                "-s".as_ref(),
                "--cacert".as_ref(),
                ca.cert.as_os_str(),
                "--cert".as_ref(),
                admin.cert.as_os_str(),
                "--key".as_ref(),
                admin.key.as_os_str(),
                readyz.as_ref(),
            ],
        ))?;
        Ok(out.status.success() && out.stdout == b"ok")
    })
    .with_context(|| format!("see {}", kube_dir.join("kube-apiserver.log").display()))?;
    Ok(KubeService {
        server,
        kubeconfig: admin_kubeconfig,
        ca_cert: ca.cert,
        ca_key: ca.key,
        version: crate::setup::kube_build::KUBE_VERSION.into(),
        etcd: etcd_url,
        service_account_issuer: ISSUER.into(),
    })
}

/// Starts `c` in a process group of its own (so Ctrl-C meant for a test run
/// does not reach it) with its output appended to `log`; returns its pid.
pub(crate) fn spawn_logged(mut c: Command, log: &Path) -> Result<u32> {
    use std::os::unix::process::CommandExt;
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let program = c.get_program().to_string_lossy().into_owned();
    let child = c
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start {program}"))?;
    Ok(child.id())
}

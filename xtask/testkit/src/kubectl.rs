//! `kubectl` against the sandbox's API server, as its admin.

use sandbox_kit::KubeService;

/// Runs `kubectl --kubeconfig <admin> ARGS` and returns its standard
/// output.
///
/// # Panics
/// When kubectl cannot run or fails (with its standard error).
pub fn kubectl(kube: &KubeService, args: &[&str]) -> String {
    kube.kubectl(args).unwrap_or_else(|e| panic!("{e}"))
}

/// The workspace's `deploy/` directory.
pub fn deploy_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Installs deploy/ as docs/operator.md says, for the sandbox's API server
/// (1.20, so the CRDs without the CEL rule): `kubectl apply -k
/// deploy/crds-without-cel/`, the operator's namespace, `kubectl apply -k
/// deploy/`; then waits until the CRDs are established. Idempotent.
///
/// # Panics
/// When a kubectl step fails.
pub fn install_deploy(kube: &KubeService) {
    let deploy = deploy_dir();
    let crds = deploy.join("crds-without-cel");
    kubectl(kube, &["apply", "-k", &crds.to_string_lossy()]);
    ensure_namespace(kube, OPERATOR_NAMESPACE);
    kubectl(kube, &["apply", "-k", &deploy.to_string_lossy()]);
    for crd in [
        "proxies.egress-proxies.io",
        "providerhealths.egress-proxies.io",
    ] {
        kubectl(
            kube,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                &format!("crd/{crd}"),
            ],
        );
    }
}

/// The namespace deploy/ installs the operator into.
pub const OPERATOR_NAMESPACE: &str = "egress-proxies-system";

/// Creates namespace `name` unless it exists.
///
/// # Panics
/// When kubectl fails for another reason.
pub fn ensure_namespace(kube: &KubeService, name: &str) {
    if kube.kubectl(&["get", "namespace", name]).is_err() {
        kubectl(kube, &["create", "namespace", name]);
    }
}

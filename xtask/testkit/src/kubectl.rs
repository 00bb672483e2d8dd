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

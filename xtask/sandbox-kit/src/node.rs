//! What xtask's node (`cargo xtask sandbox node`, which `cargo xtask test`
//! starts) and the tests share: where its record lives and the pods'
//! network.

use std::path::{Path, PathBuf};

/// The pods' bridge on the host.
pub const POD_BRIDGE: &str = "kvm2-cni0";
/// The pods' network.
pub const POD_SUBNET: &str = "10.213.9.0/24";
/// The host's address on the pods' bridge: pods reach the host there (and
/// nothing else outside their network).
pub const POD_GATEWAY: &str = "10.213.9.1";

/// The node's record in a sandbox's state directory (present once the
/// node is Ready).
pub fn record(state_dir: &Path) -> PathBuf {
    state_dir.join("node").join("node.json")
}

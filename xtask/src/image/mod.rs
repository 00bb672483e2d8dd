//! Images this project builds without docker: OCI images ([`oci`]), among
//! them the operator's ([`operator`], `cargo xtask image`) and the node's
//! pause image and the `kubernetes` provider's Squid ([`squid`], `cargo
//! xtask squid-image`), and the proxy guest's qcow2 ([`guest`], `cargo
//! xtask guest-image`).

pub mod guest;
pub mod mmdebstrap;
pub mod oci;
pub mod operator;
pub mod squid;

//! xtask's integration tests, one binary: the sandbox's services are real
//! (libvirtd, sshd, storage, the guests' network).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod guest_net;
mod hypervisor_hosts;
mod sandbox_smoke;

//! What the sandbox and its users share: the sandbox [`Descriptor`], the
//! doors into its network namespaces, its PKI, the guest image recipe and
//! the kubeconfigs it writes. `xtask` (the task runner, a binary) makes the
//! sandbox with these; tests reach them through `testkit`, their one door.
//!
//! `cargo xtask sandbox up` starts real services — libvirtd (serving
//! `qemu:///system` and `test:///default`), virtlogd, a `dir` storage pool
//! and OpenSSH's sshd on 127.0.0.1, and the guests' network ([`GuestNet`]: a
//! network namespace with the guests' bridge, DHCP and an upstream HTTPS
//! server, libvirtd running inside it) — and writes a JSON descriptor of them.
//! The descriptor's path reaches tests through the [`ENV_VAR`] environment
//! variable. Integration tests call [`Descriptor::require`], which fails the
//! test (never skips it) when no sandbox is up.
//!
//! ```no_run
//! let sandbox = sandbox_kit::Descriptor::require();
//! println!("libvirt socket: {}", sandbox.libvirt.socket.display());
//! println!("sshd: {}:{}", sandbox.ssh.host, sandbox.ssh.port);
//! ```
//!
//! Guests are reachable only from inside the guest network namespace:
//! [`connect_in`] and [`in_netns`] make sockets there, [`command_in`] runs a
//! program there.
//!
//! The proxy guest image that `cargo xtask guest-image` builds is found
//! through [`guest_recipe::cached`].

mod descriptor;
pub mod guest_recipe;
mod hypervisor_host;
pub mod kubeconfig;
pub mod node;
pub mod pki;
pub mod prometheus;
pub mod squid_recipe;

pub use descriptor::{
    Descriptor, DescriptorError, ENV_VAR, GuestImage, KubeService, LibvirtService, PoolInfo,
    SshService,
};
pub use descriptor::{GuestNet, Lease};
pub use hypervisor_host::{HostNetwork, HypervisorHost};

mod netns;

/// A TCP port on 127.0.0.1 nothing listens on right now (the kernel's
/// pick; another process may take it before the caller binds it).
///
/// # Errors
/// The bind to port 0 failing.
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

pub use netns::{command_in, connect_in, in_netns, netns_path};

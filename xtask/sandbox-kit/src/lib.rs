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
pub mod pki;

pub use descriptor::{
    Descriptor, DescriptorError, ENV_VAR, GuestImage, KubeService, LibvirtService, PoolInfo,
    SshService,
};
pub use descriptor::{GuestNet, Lease};
pub use hypervisor_host::{HostNetwork, HypervisorHost};

mod netns;

pub use netns::{command_in, connect_in, in_netns, netns_path};

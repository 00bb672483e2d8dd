//! The workspace's test support, one module per idea, shared by every
//! crate's integration tests (a dev-dependency only; never published).
//!
//! - [`Descriptor`]: the sandbox's services (`Descriptor::require()` fails
//!   a test when no sandbox is up), and the doors into the guests' network
//!   namespace ([`connect_in`], [`in_netns`], [`command_in`]) — from
//!   `sandbox-kit`, which xtask shares; tests reach it only through here.
//! - [`providers_yaml`]: the providers config of one kvm2 entry on the
//!   sandbox, rendered from the descriptor and parsed by provider-api.
//! - [`relay`]: one TCP or unix relay that forwards, freezes (sockets open,
//!   nothing read or sent), freezes after N bytes, or cuts, with counters.
//! - [`silent`]: a listener that accepts and never answers.
//! - [`virsh`] and [`kubectl`]: the command-line tools against the sandbox.
//! - [`names`]: unique names and random hex for test objects; [`bytes`]:
//!   deterministic test data.
//! - [`bench`]: the runtime benchmarks run on, concurrent call rates, and
//!   the medians and per-round ratios they print.
//! - [`run`]: a command-line tool's output, or the failure with its
//!   standard error.
//! - [`tasks`]: counting the runtime's alive tasks (leak checks).
//! - [`libvirtd`] and [`sshd`]: daemons of a test's own, killed on drop.
//! - [`qemu_img`]: empty qcow2 images.
//! - [`pki`]: a CA and the server and client certificates it signs (TLS
//!   tests).
//! - [`captured`]: log output captured for assertions.
//! - [`package`]: a crate as published: packaged, unpacked outside the
//!   workspace, its own tests run there.
//!
//! A test kit fails the test that uses it: its helpers panic with the cause
//! instead of returning errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod bench;
pub mod bytes;
pub mod captured;
pub mod kubectl;
pub mod libvirtd;
pub mod names;
pub mod otlp;
pub mod package;
pub mod pki;
pub mod pods;
pub mod pprof;
pub use sandbox_kit::prometheus;
pub mod providers_yaml;
pub mod qemu_img;
pub mod relay;
pub mod run;
pub mod silent;
pub mod squid;
pub mod sshd;
pub mod tasks;
pub mod virsh;
mod wait;

/// A port on 127.0.0.1 nothing listens on right now
/// ([`sandbox_kit::free_port`]).
///
/// # Panics
/// When the machine cannot bind a port at all.
#[allow(clippy::expect_used)]
pub fn free_port() -> u16 {
    sandbox_kit::free_port().expect("a port on 127.0.0.1")
}

pub use sandbox_kit::{
    Descriptor, ENV_VAR, GuestImage, GuestNet, HostNetwork, HypervisorHost, KubeService,
    SshService, command_in, connect_in, in_netns, netns_path,
};

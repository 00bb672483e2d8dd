//! `virsh` against a libvirt daemon (usually the sandbox's), independent of
//! the client under test: for checking what a test did and for clean-up.

use std::process::{Command, Output, Stdio};

use sandbox_kit::Descriptor;

/// `virsh -c URI ...` runs.
#[derive(Clone, Debug)]
pub struct Virsh {
    uri: String,
}

impl Virsh {
    /// Runs against `uri` as given.
    pub fn new(uri: impl Into<String>) -> Self {
        Virsh { uri: uri.into() }
    }

    /// The sandbox daemon's `qemu:///system`, through its socket.
    pub fn qemu(sandbox: &Descriptor) -> Self {
        Self::new(sandbox.virsh_uri(&sandbox.libvirt.qemu_uri))
    }

    /// The sandbox daemon's `test:///default`, through its socket.
    pub fn test_driver(sandbox: &Descriptor) -> Self {
        Self::new(sandbox.virsh_uri(&sandbox.libvirt.test_uri))
    }

    /// The URI virsh connects to.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Runs `virsh -c URI args...` and returns its output, whatever its
    /// status.
    ///
    /// # Panics
    /// When virsh cannot be started.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("virsh")
            .arg("-c")
            .arg(&self.uri)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("virsh runs")
    }

    /// The standard output of a successful run.
    ///
    /// # Panics
    /// When virsh fails (with its standard error).
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "virsh {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Whether the run succeeded, and its standard output and error
    /// together.
    pub fn status(&self, args: &[&str]) -> (bool, String) {
        let out = self.run(args);
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    }
}

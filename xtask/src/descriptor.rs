//! The sandbox descriptor: what `cargo xtask sandbox up` started and where.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The environment variable that holds the path of the descriptor file.
pub const ENV_VAR: &str = "KVM2_SANDBOX";

/// Everything a test needs to reach the sandbox's services.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Descriptor {
    /// The per-run state directory holding configs, logs, keys and sockets.
    pub state_dir: PathBuf,
    /// The libvirt daemon.
    pub libvirt: LibvirtService,
    /// The OpenSSH daemon.
    pub ssh: SshService,
    /// The path of libvirt's socket as seen from the SSH server's side
    /// (what a `direct-streamlocal` channel opens).
    pub remote_socket: PathBuf,
    /// The `dir` storage pool dedicated to tests (on `qemu:///system`).
    pub pool: PoolInfo,
    /// An isolated Linux bridge (no uplink, no address) that test domains'
    /// NICs attach to. Guest traffic on it reaches nothing outside it.
    #[serde(default)]
    pub bridge: String,
}

/// The sandbox's libvirtd (the monolithic daemon).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LibvirtService {
    /// Read-write unix socket of the daemon.
    pub socket: PathBuf,
    /// URI of the real QEMU driver, e.g. `qemu:///system`.
    pub qemu_uri: String,
    /// URI of libvirt's in-memory test driver, e.g. `test:///default`.
    pub test_uri: String,
    /// The daemon's pid file (a test that kills the daemon restarts it with
    /// [`LibvirtService::config`]).
    pub pid_file: PathBuf,
    /// The daemon's `libvirtd.conf`.
    pub config: PathBuf,
    /// Version of the daemon, as `major.minor.micro`.
    pub version: String,
}

/// The sandbox's sshd, listening on loopback.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct SshService {
    /// Address sshd listens on (always loopback).
    pub host: String,
    /// TCP port sshd listens on.
    pub port: u16,
    /// User to log in as.
    pub user: String,
    /// Private key (ed25519, unencrypted) accepted by sshd.
    pub key_path: PathBuf,
    /// A known_hosts file holding sshd's host key under `[host]:port`.
    pub known_hosts_path: PathBuf,
    /// sshd's `AuthorizedKeysFile`.
    pub authorized_keys_path: PathBuf,
    /// sshd's host private key (tests that run an sshd of their own reuse it).
    pub host_key_path: PathBuf,
    /// The `sshd_config` the sandbox's sshd runs with.
    pub config: PathBuf,
}

/// The dedicated `dir` storage pool.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PoolInfo {
    /// Pool name on `qemu:///system`.
    pub name: String,
    /// Directory backing the pool.
    pub dir: PathBuf,
}

/// Why the descriptor could not be read.
#[derive(Debug)]
pub enum DescriptorError {
    /// [`ENV_VAR`] is not set: no sandbox was started for this test run.
    NotSet,
    /// The descriptor file could not be read.
    Read(PathBuf, std::io::Error),
    /// The descriptor file is not a valid descriptor.
    Parse(PathBuf, serde_json::Error),
}

impl fmt::Display for DescriptorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotSet => write!(
                f,
                "{ENV_VAR} is not set: integration tests need the sandbox; \
                 run them with `cargo xtask test` (or `cargo xtask sandbox up` \
                 and export the variable it prints)"
            ),
            Self::Read(path, e) => write!(
                f,
                "cannot read sandbox descriptor {}: {e}; is the sandbox up? \
                 run the tests with `cargo xtask test`",
                path.display()
            ),
            Self::Parse(path, e) => write!(
                f,
                "sandbox descriptor {} is invalid: {e}; restart it with \
                 `cargo xtask sandbox down && cargo xtask sandbox up`",
                path.display()
            ),
        }
    }
}

impl std::error::Error for DescriptorError {}

impl Descriptor {
    /// Reads the descriptor named by [`ENV_VAR`].
    ///
    /// # Errors
    /// [`DescriptorError`] when the variable is unset or the file is missing
    /// or invalid.
    pub fn from_env() -> Result<Self, DescriptorError> {
        let path = std::env::var_os(ENV_VAR).ok_or(DescriptorError::NotSet)?;
        Self::load(Path::new(&path))
    }

    /// Reads a descriptor file.
    ///
    /// # Errors
    /// [`DescriptorError`] when the file is missing or invalid.
    pub fn load(path: &Path) -> Result<Self, DescriptorError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| DescriptorError::Read(path.to_owned(), e))?;
        serde_json::from_str(&text).map_err(|e| DescriptorError::Parse(path.to_owned(), e))
    }

    /// Reads the descriptor for an integration test, failing the test with a
    /// message naming `cargo xtask test` when there is no sandbox.
    ///
    /// Integration tests must fail, never pass silently, without the sandbox.
    #[allow(clippy::panic)]
    pub fn require() -> Self {
        match Self::from_env() {
            Ok(d) => d,
            Err(e) => panic!("{e}"),
        }
    }

    /// A libvirt URI that reaches the sandbox daemon's socket for `virsh -c`,
    /// e.g. `qemu+unix:///system?socket=/.../libvirt-sock`.
    pub fn virsh_uri(&self, uri: &str) -> String {
        let (scheme, rest) = uri.split_once("://").unwrap_or((uri, "/"));
        format!(
            "{scheme}+unix://{rest}?socket={}",
            self.libvirt.socket.display()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_env_names_the_test_command() {
        let e = DescriptorError::NotSet.to_string();
        assert!(e.contains("cargo xtask test"), "{e}");
    }

    #[test]
    fn virsh_uri_adds_socket() {
        let d = Descriptor {
            state_dir: "/s".into(),
            libvirt: LibvirtService {
                socket: "/s/libvirt-sock".into(),
                qemu_uri: "qemu:///system".into(),
                test_uri: "test:///default".into(),
                pid_file: "/s/libvirtd.pid".into(),
                config: "/s/libvirtd.conf".into(),
                version: "11.3.0".into(),
            },
            ssh: SshService {
                host: "127.0.0.1".into(),
                port: 2222,
                user: "root".into(),
                key_path: "/s/id".into(),
                known_hosts_path: "/s/kh".into(),
                authorized_keys_path: "/s/ak".into(),
                host_key_path: "/s/hk".into(),
                config: "/s/sshd_config".into(),
            },
            remote_socket: "/s/libvirt-sock".into(),
            pool: PoolInfo {
                name: "p".into(),
                dir: "/s/pool".into(),
            },
            bridge: "kvm2-sbx0".into(),
        };
        assert_eq!(
            d.virsh_uri("qemu:///system"),
            "qemu+unix:///system?socket=/s/libvirt-sock"
        );
        assert_eq!(
            d.virsh_uri("test:///default"),
            "test+unix:///default?socket=/s/libvirt-sock"
        );
        let json = serde_json::to_string(&d).unwrap();
        assert_eq!(serde_json::from_str::<Descriptor>(&json).unwrap(), d);
    }
}

//! Every subcommand and flag of `cargo xtask`, with its help (clap derive):
//! `cargo xtask help` and `cargo xtask <command> --help` print them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The project's task runner: setup, sandbox, tests, CI, benchmarks, fuzzing,
/// code generation, images and the end-to-end demo.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
pub struct Xtask {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `cargo xtask <command>`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Install what the tests need (Debian packages, the API server and node
    /// built from Debian's source, cached); a fast no-op when present.
    Setup,
    /// The sandbox: real libvirtd, virtlogd, pool, sshd, guest network and
    /// Kubernetes API server on this machine (as root).
    Sandbox {
        /// up, node, down or status.
        #[command(subcommand)]
        action: SandboxAction,
    },
    /// setup → sandbox up → `cargo test --workspace [ARGS]` → sandbox down
    /// (also when tests fail; a sandbox that was up stays up).
    Test {
        /// Passed to `cargo test` (e.g. `-p ssh-socket -- dial`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// What CI runs: fmt --check, codegen --check, clippy -D warnings, the
    /// tests, then the demo; fails on anything left running.
    Ci,
    /// Benchmarks against the sandbox; each runs its peer in the same run
    /// and prints ratios.
    Bench {
        /// `demo`, or a crate (`libvirt-rpc`, `ssh-socket`, `kvm2`, ...).
        #[command(subcommand)]
        target: BenchTarget,
    },
    /// A mutation fuzzer over a crate's decoder.
    Fuzz {
        /// The crate whose decoder to fuzz.
        #[arg(value_enum)]
        krate: FuzzTarget,
        /// How long to run.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
    },
    /// Generate code from its upstream description.
    Codegen {
        /// What to generate.
        #[arg(value_enum)]
        target: CodegenTarget,
        /// Write nothing; fail when the committed files differ from a fresh
        /// run.
        #[arg(long)]
        check: bool,
    },
    /// Build the operator's image (operator/Dockerfile's output, without
    /// docker) as an archive for `docker load`, `podman load` or `ctr images
    /// import`; print its name and path.
    Image {
        /// Where to write the archive (default
        /// target/egress-proxies-operator-VERSION.tar).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Build (or find cached) the proxy guest image and print its digest
    /// and path.
    GuestImage {
        /// Rebuild even when the cache has the current recipe's image.
        #[arg(long)]
        force: bool,
    },
    /// Build (or find cached) the Squid container image of the kubernetes
    /// provider's Pods and print its reference and archive.
    SquidImage,
    /// The whole system on the sandbox: API server, node, the operator as
    /// deploy/'s pod, real proxy guests; prints the validation table.
    Demo {
        /// Leave everything running and print how to reach it.
        #[arg(long)]
        keep: bool,
    },
    /// The demo's validation table against a host and cluster you name
    /// (docs/integration.md), or the sandbox without `--host`.
    Integration(Box<IntegrationArgs>),
}

/// `cargo xtask sandbox <action>`.
#[derive(Debug, Subcommand)]
pub enum SandboxAction {
    /// Start the sandbox (or report the one up) and print its descriptor.
    Up {
        /// Hypervisor hosts to start: host 1 on loopback, hosts 2..=N each
        /// in a network namespace of its own (at most 32).
        #[arg(long, default_value_t = crate::sandbox::hosts::DEFAULT_HOSTS)]
        hosts: usize,
    },
    /// Start the sandbox and its Kubernetes node (containerd, kubelet).
    Node,
    /// Stop what `up` started and remove what tests left in it.
    Down,
    /// Report whether a sandbox is up (exit status 0) or not (1).
    Status,
}

/// `cargo xtask bench <target>`.
#[derive(Debug, Subcommand)]
pub enum BenchTarget {
    /// Proxy-to-serving times: the operator and real guests vs plain virsh.
    Demo {
        /// Rounds of 1 and 5 Proxies at once.
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Leave a sandbox this run started running.
        #[arg(long)]
        keep: bool,
    },
    /// A crate's benchmarks: `cargo bench -p CRATE [ARGS]` (`kvm2` is
    /// `kvm2-provider`).
    #[command(external_subcommand)]
    Crate(Vec<String>),
}

/// Crates with a fuzzer.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FuzzTarget {
    /// libvirt-rpc's packet decoder (in libvirt-rpc-probes).
    LibvirtRpc,
}

/// What `codegen` generates.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CodegenTarget {
    /// libvirt-rpc/src/generated/ from libvirt's protocol and API files.
    LibvirtRpc,
}

/// `cargo xtask integration`'s flags (docs/integration.md). Without
/// `--host` the run targets the local sandbox; with it, the flags that
/// describe the host and cluster are required.
#[derive(Debug, Clone, Args)]
pub struct IntegrationArgs {
    /// The hypervisor host: `user@address[:port]`.
    #[arg(long, requires_all = ["key", "known_hosts", "bridge", "pool", "image_url", "image_sha256", "kubeconfig"])]
    pub host: Option<String>,
    /// The SSH private key for the host.
    #[arg(long)]
    pub key: Option<PathBuf>,
    /// A known_hosts file that lists the host.
    #[arg(long)]
    pub known_hosts: Option<PathBuf>,
    /// The bridge the guests' NICs join.
    #[arg(long)]
    pub bridge: Option<String>,
    /// The libvirt storage pool for images and per-VM volumes.
    #[arg(long)]
    pub pool: Option<String>,
    /// libvirtd's socket on the host.
    #[arg(long, default_value = "/var/run/libvirt/libvirt-sock")]
    pub socket: String,
    /// The guest image's URL (reachable from this machine).
    #[arg(long)]
    pub image_url: Option<String>,
    /// The guest image's sha256 (what `cargo xtask guest-image` printed).
    #[arg(long)]
    pub image_sha256: Option<String>,
    /// The libvirt domain type.
    #[arg(long, default_value = "kvm")]
    pub domain_type: String,
    /// The networks whose clients Squid serves (CIDRs, comma-separated).
    #[arg(long, default_value = "10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16")]
    pub allowed_clients: String,
    /// What the health probe CONNECTs to through each proxy.
    #[arg(long, default_value = "deb.debian.org:443")]
    pub probe_target: String,
    /// A network namespace on this machine to open the probes in.
    #[arg(long)]
    pub probe_netns: Option<String>,
    /// The cluster's kubeconfig.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Skip the deletion and clean-up; print how to reach what runs.
    #[arg(long)]
    pub keep: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &[&str]) -> Result<Xtask, clap::Error> {
        Xtask::try_parse_from(std::iter::once("xtask").chain(args.iter().copied()))
    }

    #[test]
    fn the_cli_is_consistent() {
        Xtask::command().debug_assert();
    }

    #[test]
    fn test_passes_its_arguments_through() {
        let Command::Test { args } = parse(&["test", "-p", "ssh-socket", "--", "dial"])
            .unwrap()
            .command
        else {
            panic!("not test");
        };
        assert_eq!(args, ["-p", "ssh-socket", "--", "dial"]);
    }

    #[test]
    fn bench_takes_demo_or_any_crate() {
        assert!(matches!(
            parse(&["bench", "demo", "--rounds", "3"]).unwrap().command,
            Command::Bench {
                target: BenchTarget::Demo {
                    rounds: 3,
                    keep: false
                }
            }
        ));
        let Command::Bench {
            target: BenchTarget::Crate(args),
        } = parse(&["bench", "kvm2", "--bench", "serving"])
            .unwrap()
            .command
        else {
            panic!("not a crate bench");
        };
        assert_eq!(args, ["kvm2", "--bench", "serving"]);
    }

    #[test]
    fn integration_with_a_host_needs_the_rest() {
        let e = parse(&["integration", "--host", "root@kvm1"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        let Command::Integration(args) = parse(&["integration", "--keep"]).unwrap().command else {
            panic!("not integration");
        };
        assert!(args.host.is_none() && args.keep);
        assert_eq!(args.probe_target, "deb.debian.org:443");
    }

    #[test]
    fn unknown_flags_are_refused() {
        assert!(parse(&["demo", "--kep"]).is_err());
        assert!(parse(&["codegen", "libvirt-rpc", "--chek"]).is_err());
        assert!(parse(&["fuzz", "libvirt-rpc", "--seconds", "x"]).is_err());
    }
}

//! `cargo xtask setup`: installs with apt what the tests need.
//!
//! Fast no-op when everything is present: it only checks files. On Debian
//! bookworm the distro's QEMU conflicts with the preinstalled qemu-utils from
//! bookworm-backports, so libvirt 11 and QEMU 10 come together from
//! bookworm-backports.

pub mod kube_build;

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::util::{cmd, run};

/// A file whose presence proves a package is installed, and that package.
const REQUIRED: &[(&str, &str, Source)] = &[
    ("/usr/sbin/libvirtd", "libvirt-daemon", Source::Backports),
    (
        "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so",
        "libvirt-daemon-driver-qemu",
        Source::Backports,
    ),
    (
        "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_storage.so",
        "libvirt-daemon-driver-storage",
        Source::Backports,
    ),
    (
        "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_network.so",
        "libvirt-daemon-driver-network",
        Source::Backports,
    ),
    ("/usr/sbin/virtlogd", "libvirt-daemon", Source::Backports),
    ("/usr/bin/virsh", "libvirt-clients", Source::Backports),
    (
        "/usr/bin/qemu-system-x86_64",
        "qemu-system-x86",
        Source::Backports,
    ),
    (
        "/usr/lib/python3/dist-packages/libvirt.py",
        "python3-libvirt",
        Source::Backports,
    ),
    ("/usr/sbin/sshd", "openssh-server", Source::Main),
    ("/usr/bin/ssh", "openssh-client", Source::Main),
    ("/usr/bin/ssh-keygen", "openssh-client", Source::Main),
    ("/usr/bin/isoinfo", "genisoimage", Source::Main),
    ("/usr/bin/curl", "curl", Source::Main),
    // deploy/samples/lease-client.sh, run by the consumer lease test.
    ("/usr/bin/jq", "jq", Source::Main),
    ("/usr/share/OVMF/OVMF_CODE_4M.fd", "ovmf", Source::Main),
    // The Kubernetes control plane: etcd, and what builds kube-apiserver.
    ("/usr/bin/etcd", "etcd-server", Source::Main),
    ("/usr/bin/openssl", "openssl", Source::Main),
    ("/usr/lib/go-1.19/bin/go", "golang-1.19-go", Source::Main),
    (
        "/usr/share/gocode/src/github.com/modern-go/reflect2/reflect2.go",
        "golang-github-modern-go-reflect2-dev",
        Source::Main,
    ),
    ("/usr/bin/rsync", "rsync", Source::Main),
    ("/usr/bin/make", "make", Source::Main),
    ("/usr/bin/dpkg-source", "dpkg-dev", Source::Main),
    ("/usr/bin/kubectl", "kubernetes-client", Source::Main),
    // The sandbox's node (the demo runs the operator's pod): the container
    // runtime, its OCI runtime and the CNI plugins the node's network
    // config names.
    ("/usr/bin/containerd", "containerd", Source::Main),
    ("/usr/bin/ctr", "containerd", Source::Main),
    ("/usr/sbin/runc", "runc", Source::Main),
    (
        "/usr/lib/cni/bridge",
        "containernetworking-plugins",
        Source::Main,
    ),
    // The real tools that read what the provider renders, for host-side
    // checks: cloud-init's schema validator (never run at boot here: see
    // CLOUD_INIT_DISABLED) and Squid's parser (its daemon is not started).
    ("/usr/bin/cloud-init", "cloud-init", Source::Main),
    ("/usr/sbin/squid", "squid", Source::Main),
    // The guests' network namespace: DHCP (dnsmasq), the upstream HTTPS
    // server (Debian's python3) and its certificates, `ip netns`; busybox's
    // udhcpc is the real DHCP client its tests run.
    ("/usr/sbin/dnsmasq", "dnsmasq-base", Source::Main),
    ("/usr/bin/python3", "python3", Source::Main),
    ("/usr/bin/openssl", "openssl", Source::Main),
    ("/bin/ip", "iproute2", Source::Main),
    // Cutting a sandbox hypervisor host's link (packets dropped both ways).
    ("/usr/sbin/nft", "nftables", Source::Main),
    // kube-proxy on the sandbox's node programs Services' cluster IPs with
    // iptables (Debian's, over nf_tables) and clears conntrack entries.
    ("/usr/sbin/iptables", "iptables", Source::Main),
    ("/usr/sbin/iptables-restore", "iptables", Source::Main),
    ("/usr/sbin/conntrack", "conntrack", Source::Main),
    ("/bin/busybox", "busybox", Source::Main),
    // The shipped alert rules are checked and unit-tested by Prometheus's
    // own promtool (deploy/prometheus/).
    ("/usr/bin/promtool", "prometheus", Source::Main),
    // The operator's OTLP span export is decoded, in its tests, by protoc
    // with OpenTelemetry's official protocol files.
    ("/usr/bin/protoc", "protobuf-compiler", Source::Main),
    (
        "/usr/include/opentelemetry/proto/collector/trace/v1/trace_service.proto",
        "opentelemetry-proto",
        Source::Main,
    ),
    // The proxy guest image (`cargo xtask guest-image`): mmdebstrap and
    // Debian's keyring, the partition table, filesystems written into the
    // disk file, SYSLINUX through mtools, qemu-img for the qcow2.
    ("/usr/bin/mmdebstrap", "mmdebstrap", Source::Main),
    (
        "/usr/share/keyrings/debian-archive-keyring.gpg",
        "debian-archive-keyring",
        Source::Main,
    ),
    ("/usr/sbin/sfdisk", "fdisk", Source::Main),
    ("/usr/sbin/mkfs.fat", "dosfstools", Source::Main),
    ("/usr/sbin/mkfs.ext4", "e2fsprogs", Source::Main),
    ("/usr/bin/mcopy", "mtools", Source::Main),
    ("/usr/bin/syslinux", "syslinux", Source::Main),
    (
        "/usr/lib/syslinux/mbr/mbr.bin",
        "syslinux-common",
        Source::Main,
    ),
    ("/usr/bin/qemu-img", "qemu-utils", Source::Backports),
];

/// cloud-init's own switch: with this file present it does nothing at boot.
const CLOUD_INIT_DISABLED: &str = "/etc/cloud/cloud-init.disabled";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    Main,
    Backports,
}

const BACKPORTS_LIST: &str = "/etc/apt/sources.list.d/bookworm-backports.sources";
const BACKPORTS_SOURCE: &str = "Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";

/// The packages whose marker files are missing.
pub fn missing() -> Vec<(&'static str, bool)> {
    let mut out: Vec<(&'static str, bool)> = Vec::new();
    for (file, package, source) in REQUIRED {
        if !Path::new(file).exists() && !out.iter().any(|(p, _)| p == package) {
            out.push((package, *source == Source::Backports));
        }
    }
    out
}

/// Whether `setup` has anything to do.
pub fn needed() -> bool {
    !missing().is_empty() || !kube_build::APISERVER.cached() || !kube_build::NODE.cached()
}

/// Installs what is missing and builds Kubernetes' binaries unless cached; a
/// fast no-op when nothing is missing.
pub fn setup() -> Result<()> {
    let started = Instant::now();
    install_packages()?;
    kube_build::ensure(&kube_build::APISERVER)?;
    kube_build::ensure(&kube_build::NODE)?;
    eprintln!(
        "setup: everything is installed ({} checks, {:.0?})",
        REQUIRED.len(),
        started.elapsed()
    );
    Ok(())
}

fn install_packages() -> Result<()> {
    let started = Instant::now();
    let missing = missing();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|(p, _)| *p).collect();
    eprintln!("setup: installing {}", names.join(" "));
    let bookworm = std::fs::read_to_string("/etc/os-release")
        .map(|s| s.contains("VERSION_CODENAME=bookworm"))
        .unwrap_or(false);
    if bookworm && !Path::new(BACKPORTS_LIST).exists() {
        eprintln!("setup: adding bookworm-backports to apt's sources ({BACKPORTS_LIST})");
        std::fs::write(BACKPORTS_LIST, BACKPORTS_SOURCE)
            .with_context(|| format!("cannot write {BACKPORTS_LIST} (run as root)"))?;
    }
    run(cmd(
        "apt-get",
        ["-o", "DPkg::Lock::Timeout=600", "update", "-q"],
    ))?;
    let mut install = cmd(
        "apt-get",
        ["-o", "DPkg::Lock::Timeout=600", "install", "-y", "-q"],
    );
    install.env("DEBIAN_FRONTEND", "noninteractive");
    if bookworm && missing.iter().any(|(_, bp)| *bp) {
        install.args(["-t", "bookworm-backports"]);
    }
    install.args(&names);
    run(install)?;
    // cloud-init is here for `cloud-init schema` only: it must never
    // configure this machine at its next boot.
    if Path::new("/usr/bin/cloud-init").exists() {
        std::fs::create_dir_all("/etc/cloud")?;
        std::fs::write(CLOUD_INIT_DISABLED, "")
            .with_context(|| format!("cannot write {CLOUD_INIT_DISABLED}"))?;
    }
    let still = missing_after();
    anyhow::ensure!(
        still.is_empty(),
        "setup: still missing after install: {}",
        still.join(", ")
    );
    eprintln!("setup: packages installed in {:.1?}", started.elapsed());
    Ok(())
}

fn missing_after() -> Vec<&'static str> {
    REQUIRED
        .iter()
        .filter(|(f, _, _)| !Path::new(f).exists())
        .map(|(f, _, _)| *f)
        .collect()
}

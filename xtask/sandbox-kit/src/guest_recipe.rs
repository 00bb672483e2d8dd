//! The proxy guest image's recipe, its cache key and where a built image is
//! found: the part of `cargo xtask guest-image` that tests share.
//!
//! The recipe is data: the Debian suite and mirrors, the package list, the
//! files written into the image, the units enabled and masked, the disk
//! layout and the kernel command line, plus [`BUILD_VERSION`] for the build
//! steps themselves. [`key`] hashes all of it; a built image lives in
//! `CACHE_ROOT/<key>/` and a changed recipe builds a new one beside it.
//! A directory named by its key is complete: builds happen elsewhere and are
//! renamed into place last.
//!
//! ```no_run
//! if let Some(image) = sandbox_kit::guest_recipe::cached().unwrap() {
//!     println!("{} sha256 {}", image.path.display(), image.sha256);
//! }
//! ```

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where built images live, one directory per [`key`] (outside the work
/// tree, so every checkout and CI run on the machine shares them).
pub const CACHE_ROOT: &str = "/var/cache/egress-proxies/guest-image";
/// The image's file name inside its key directory.
pub const IMAGE_FILE: &str = "proxy-guest.qcow2";
/// Beside the image: `sha256sum` format (`<hex>  proxy-guest.qcow2`).
pub const SHA256_FILE: &str = "proxy-guest.qcow2.sha256";
/// Beside the image: every installed package, `name<TAB>version<TAB>arch`.
pub const MANIFEST_FILE: &str = "manifest.txt";
/// Beside the image: the recipe text [`key`] hashes.
pub const RECIPE_FILE: &str = "recipe.txt";

/// Bumped whenever the build *steps* (xtask's `guest_image` module) change
/// in a way that changes the image; the data below is hashed as it is.
pub const BUILD_VERSION: u32 = 1;

/// The Debian release.
pub const SUITE: &str = "bookworm";
/// apt sources used while building (the image itself keeps none).
pub const MIRRORS: &[&str] = &[
    "deb http://deb.debian.org/debian bookworm main",
    "deb http://deb.debian.org/debian bookworm-updates main",
    "deb http://deb.debian.org/debian-security bookworm-security main",
];
/// The mmdebstrap variant: Essential + Priority required, then [`PACKAGES`]
/// with their dependencies (no Recommends).
pub const VARIANT: &str = "minbase";
/// Installed on top of the variant.
pub const PACKAGES: &[&str] = &[
    // Debian's cloud kernel: virtio drivers, no hardware zoo. It has no AHCI
    // driver: a SATA cdrom (q35's default bus) is invisible to it.
    "linux-image-cloud-amd64",
    "initramfs-tools",
    "systemd-sysv",
    "udev",
    "dbus",
    // cloud-init's networkd renderer + systemd's own DHCP client; resolved
    // turns the DHCP DNS servers into /etc/resolv.conf for Squid.
    "systemd-resolved",
    "iproute2",
    "netbase",
    "cloud-init",
    // growpart, so the root partition fills a larger overlay.
    "cloud-guest-utils",
    "qemu-guest-agent",
    "squid",
];
/// Paths dpkg never unpacks (documentation and translations).
pub const DPKG_EXCLUDES: &[&str] = &[
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/locale/*",
];
/// Kept despite [`DPKG_EXCLUDES`]: the licences.
pub const DPKG_INCLUDES: &[&str] = &["/usr/share/doc/*/copyright"];

/// The root filesystem's UUID (fixed, so the kernel command line and fstab
/// can name it).
pub const ROOT_UUID: &str = "6d3a1d36-6f8e-4b53-9d1c-6a1f0e6f0d01";
/// The MBR disk identifier; partitions are `PARTUUID=45505258-01`, `-02`.
pub const DISK_ID: u32 = 0x4550_5258;
/// The whole disk in MiB: small, so the smallest machine type (1 GiB) fits
/// it; cloud-init's growpart + resizefs fill a larger overlay at first boot.
pub const DISK_MIB: u64 = 1024;
/// The FAT boot partition (SYSLINUX, the kernel and the initramfs) starts at
/// 1 MiB and is this large; the ext4 root takes the rest.
pub const BOOT_MIB: u64 = 64;
/// The kernel command line.
pub const KERNEL_CMDLINE: &str = "root=UUID=6d3a1d36-6f8e-4b53-9d1c-6a1f0e6f0d01 ro \
     console=ttyS0,115200 net.ifnames=0 quiet";

/// Units enabled in the image.
pub const ENABLE: &[&str] = &["systemd-networkd.service", "systemd-resolved.service"];
/// Units masked: periodic jobs that need the network or only cost boot time
/// in a short-lived proxy VM, the VGA console's getty and logind (no local
/// logins but the serial console's).
pub const MASK: &[&str] = &[
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer",
    "e2scrub_all.timer",
    "e2scrub_reap.service",
    "fstrim.timer",
    "getty@tty1.service",
    "systemd-logind.service",
];

/// Files written into the image (path, content).
pub const FILES: &[(&str, &str)] = &[
    ("/etc/hostname", "debian\n"),
    (
        "/etc/hosts",
        "127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n\
         ff02::1\t\tip6-allnodes\nff02::2\t\tip6-allrouters\n",
    ),
    (
        "/etc/fstab",
        "UUID=6d3a1d36-6f8e-4b53-9d1c-6a1f0e6f0d01 / ext4 defaults,noatime,errors=remount-ro 0 1\n",
    ),
    ("/etc/default/locale", "LANG=C.UTF-8\n"),
    ("/etc/cloud/cloud.cfg.d/90_egress_proxies.cfg", CLOUD_CFG),
    (
        "/etc/initramfs-tools/conf.d/egress-proxies.conf",
        "# Only what a virtio disk needs (ext4 is built in).\nMODULES=list\nCOMPRESS=gzip\nRESUME=none\n",
    ),
    ("/etc/initramfs-tools/modules", "virtio_pci\nvirtio_blk\n"),
    (
        "/etc/modprobe.d/egress-proxies.conf",
        "# Nothing in a proxy VM uses these (TCG's CPU model offers SVM); under\n\
         # emulation every module load costs boot time.\n\
         blacklist kvm_amd\nblacklist kvm_intel\nblacklist powernow_k8\nblacklist acpi_cpufreq\n\
         blacklist pcspkr\nblacklist serio_raw\n",
    ),
    (
        "/etc/systemd/system/systemd-networkd-wait-online.service.d/egress-proxies.conf",
        "[Service]\nExecStart=\nExecStart=/lib/systemd/systemd-networkd-wait-online --any --timeout=30\n",
    ),
    (
        "/etc/systemd/system/squid.service.d/egress-proxies.conf",
        "# The image ships no squid.conf: Squid starts once one is written (by\n\
         # the provider's vendor data, then at every boot).\n\
         [Unit]\nConditionPathExists=/etc/squid/squid.conf\n",
    ),
];

/// Moved aside (from, to): Debian's default squid.conf, so Squid does not
/// start at first boot only to be restarted with the vendor data's.
pub const MOVE: &[(&str, &str)] = &[("/etc/squid/squid.conf", "/etc/squid/squid.conf.debian")];

/// Removed: apt's sources (so cloud-init's `package_update` is an instant
/// no-op offline) and the guest agent's SysV script (so the vendor data's
/// `systemctl enable` skips the slow systemd-sysv-install step).
pub const REMOVE: &[&str] = &["/etc/apt/sources.list", "/etc/init.d/qemu-guest-agent"];

/// cloud-init's configuration drop-in.
pub const CLOUD_CFG: &str = "\
# Written by cargo xtask guest-image.
# The seed is always a NoCloud cidata disc: never probe metadata services.
datasource_list: [NoCloud, None]
system_info:
  network:
    # Fallback network config: DHCP on the first NIC through systemd-networkd.
    renderers: [networkd]
# Always present; nothing to generate.
locale: C.UTF-8
# Debian's module lists without the modules whose software is not in the
# image (OpenSSH, GRUB, snap, byobu, fan, landscape, lxd, config managers,
# RMC) and so could only warn or fail.
cloud_init_modules:
  - migrator
  - seed_random
  - bootcmd
  - write-files
  - growpart
  - resizefs
  - disk_setup
  - mounts
  - set_hostname
  - update_hostname
  - update_etc_hosts
  - ca-certs
  - rsyslog
  - users-groups
cloud_config_modules:
  - keyboard
  - locale
  - set-passwords
  - apt-pipelining
  - apt-configure
  - ntp
  - timezone
  - disable-ec2-metadata
  - runcmd
cloud_final_modules:
  - package-update-upgrade-install
  - write-files-deferred
  - scripts-vendor
  - scripts-per-once
  - scripts-per-boot
  - scripts-per-instance
  - scripts-user
  - phone-home
  - final-message
  - power-state-change
";

/// The SYSLINUX configuration on the boot partition.
pub fn syslinux_cfg() -> String {
    format!(
        "DEFAULT linux\nPROMPT 0\nTIMEOUT 0\nLABEL linux\n  LINUX /vmlinuz\n  INITRD /initrd.img\n  APPEND {KERNEL_CMDLINE}\n"
    )
}

/// The recipe as text, every input on its own line: what [`key`] hashes
/// and what is written beside the image.
pub fn recipe_text() -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(s, "build-version {BUILD_VERSION}");
    let _ = writeln!(s, "suite {SUITE}");
    let _ = writeln!(s, "variant {VARIANT}");
    for m in MIRRORS {
        let _ = writeln!(s, "mirror {m}");
    }
    for p in PACKAGES {
        let _ = writeln!(s, "package {p}");
    }
    for p in DPKG_EXCLUDES {
        let _ = writeln!(s, "dpkg-exclude {p}");
    }
    for p in DPKG_INCLUDES {
        let _ = writeln!(s, "dpkg-include {p}");
    }
    for u in ENABLE {
        let _ = writeln!(s, "enable {u}");
    }
    for u in MASK {
        let _ = writeln!(s, "mask {u}");
    }
    for (from, to) in MOVE {
        let _ = writeln!(s, "move {from} {to}");
    }
    for p in REMOVE {
        let _ = writeln!(s, "remove {p}");
    }
    for (path, content) in FILES {
        let _ = writeln!(s, "file {path} {}", hex(&Sha256::digest(content)));
    }
    let _ = writeln!(s, "syslinux.cfg {}", hex(&Sha256::digest(syslinux_cfg())));
    let _ = writeln!(
        s,
        "disk {DISK_MIB}MiB boot {BOOT_MIB}MiB id {DISK_ID:08x} root {ROOT_UUID}"
    );
    s
}

/// The cache key: the first 16 hex digits of the recipe text's sha256.
pub fn key() -> String {
    let mut k = hex(&Sha256::digest(recipe_text()));
    k.truncate(16);
    k
}

/// This recipe's directory under [`CACHE_ROOT`] (it may not exist yet).
pub fn image_dir() -> PathBuf {
    Path::new(CACHE_ROOT).join(key())
}

/// A built image: its path and sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedImage {
    /// The qcow2 file.
    pub path: PathBuf,
    /// Its sha256, lower-case hex.
    pub sha256: String,
}

/// The image built from this recipe, if there is one. Reads the sha256
/// file written at build time; does not hash the image again.
///
/// # Errors
/// When the directory exists but its sha256 file cannot be read or is not
/// in `sha256sum` format (a cache someone altered by hand).
pub fn cached() -> io::Result<Option<CachedImage>> {
    cached_in(&image_dir())
}

/// [`cached`] for the image directory `dir`.
///
/// # Errors
/// As for [`cached`].
pub fn cached_in(dir: &Path) -> io::Result<Option<CachedImage>> {
    let path = dir.join(IMAGE_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(dir.join(SHA256_FILE))?;
    let sha256 = text
        .split_whitespace()
        .next()
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a sha256sum line", dir.join(SHA256_FILE).display()),
            )
        })?
        .to_ascii_lowercase();
    Ok(Some(CachedImage { path, sha256 }))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_is_stable_hex_and_names_the_recipe() {
        let k = key();
        assert_eq!(k.len(), 16);
        assert!(k.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(k, key());
        let text = recipe_text();
        assert!(text.contains("package squid\n"));
        assert!(text.contains(&format!("build-version {BUILD_VERSION}\n")));
    }

    #[test]
    fn the_kernel_and_fstab_name_the_root_filesystem_by_its_uuid() {
        assert!(KERNEL_CMDLINE.contains(&format!("root=UUID={ROOT_UUID} ")));
        let fstab = FILES.iter().find(|(p, _)| *p == "/etc/fstab").map(|f| f.1);
        assert!(fstab.is_some_and(|f| f.starts_with(&format!("UUID={ROOT_UUID} / "))));
    }

    #[test]
    fn cached_reads_the_sha256_file_and_refuses_garbage() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cached_in(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join(IMAGE_FILE), b"qcow2").unwrap();
        std::fs::write(dir.path().join(SHA256_FILE), "not a digest\n").unwrap();
        assert!(cached_in(dir.path()).is_err());
        let digest = "AB".repeat(32);
        std::fs::write(
            dir.path().join(SHA256_FILE),
            format!("{digest}  {IMAGE_FILE}\n"),
        )
        .unwrap();
        let image = cached_in(dir.path()).unwrap().unwrap();
        assert_eq!(image.sha256, "ab".repeat(32));
        assert_eq!(image.path, dir.path().join(IMAGE_FILE));
    }
}

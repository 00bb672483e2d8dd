//! The bootable disk, assembled in a sparse file with no mount and no loop
//! device:
//!
//! ```text
//! sector 0     MBR: SYSLINUX's mbr.bin + a DOS partition table (sfdisk)
//! 1 MiB        partition 1, bootable, FAT16 "BOOT": ldlinux.sys (syslinux
//!              --offset), syslinux.cfg, vmlinuz, initrd.img (mcopy)
//! 1+BOOT MiB   partition 2, ext4 "root" (mkfs.ext4 -E offset= -d TREE)
//! ```
//!
//! SeaBIOS runs mbr.bin, which chains to the active partition's SYSLINUX;
//! it loads the kernel and initramfs with the recipe's command line.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use anyhow::{Context, Result};
use sandbox_kit::guest_recipe::{BOOT_MIB, DISK_ID, DISK_MIB, ROOT_UUID, syslinux_cfg};

use super::configure::Boot;
use super::run_logged;
use crate::util::cmd;

const MIB: u64 = 1 << 20;
const SECTOR: u64 = 512;
/// SYSLINUX's MBR boot code (Debian's syslinux-common).
const MBR_CODE: &str = "/usr/lib/syslinux/mbr/mbr.bin";
/// The boot code area of an MBR, before the partition table.
const MBR_CODE_MAX: usize = 440;

/// Builds the raw disk `raw` from `tree` and its kernel and initramfs.
pub fn assemble(raw: &Path, tree: &Path, boot: &Boot, log: &Path) -> Result<()> {
    let boot_start = MIB / SECTOR;
    let boot_sectors = BOOT_MIB * MIB / SECTOR;
    let root_start = boot_start + boot_sectors;
    let root_kib = (DISK_MIB * MIB - root_start * SECTOR) / 1024;

    let file =
        std::fs::File::create(raw).with_context(|| format!("cannot create {}", raw.display()))?;
    file.set_len(DISK_MIB * MIB)?;
    drop(file);

    let table = format!(
        "label: dos\nlabel-id: 0x{DISK_ID:08x}\n\
         start={boot_start}, size={boot_sectors}, type=e, bootable\n\
         start={root_start}, type=83\n"
    );
    let table_file = raw.with_extension("sfdisk");
    std::fs::write(&table_file, table)?;
    let mut sfdisk = cmd("sfdisk", ["--no-reread", "--no-tell-kernel"]);
    sfdisk.arg(raw).stdin(
        std::fs::File::open(&table_file)
            .with_context(|| format!("cannot open {}", table_file.display()))?,
    );
    run_logged(sfdisk, log)?;
    std::fs::remove_file(&table_file)?;
    write_mbr_code(raw)?;

    // The boot partition: FAT16 written in place, its hidden-sectors field
    // set to its start so SYSLINUX's boot sector finds itself.
    let mut fat = cmd(
        "mkfs.fat",
        [
            "-F".to_owned(),
            "16".to_owned(),
            "-n".to_owned(),
            "BOOT".to_owned(),
            "-i".to_owned(),
            format!("{DISK_ID:08x}"),
            "-h".to_owned(),
            boot_start.to_string(),
            format!("--offset={boot_start}"),
            "--invariant".to_owned(),
        ],
    );
    fat.arg(raw).arg((boot_sectors * SECTOR / 1024).to_string());
    run_logged(fat, log)?;
    let drive = format!("{}@@{}", raw.display(), boot_start * SECTOR);
    let cfg = raw.with_extension("syslinux.cfg");
    std::fs::write(&cfg, syslinux_cfg())?;
    for (from, to) in [
        (boot.kernel.as_path(), "::/vmlinuz"),
        (boot.initrd.as_path(), "::/initrd.img"),
        (cfg.as_path(), "::/syslinux.cfg"),
    ] {
        let mut mcopy = cmd("mcopy", ["-i", &drive]);
        mcopy.arg(from).arg(to);
        run_logged(mcopy, log)?;
    }
    std::fs::remove_file(&cfg)?;
    let mut syslinux = cmd(
        "syslinux",
        [
            "--offset".to_owned(),
            (boot_start * SECTOR).to_string(),
            "--install".to_owned(),
        ],
    );
    syslinux.arg(raw);
    run_logged(syslinux, log)?;

    // The root partition: ext4 filled from the tree, written in place.
    let mut ext4 = cmd(
        "mkfs.ext4",
        [
            "-q".to_owned(),
            // The disk file already holds a partition table: no prompt.
            "-F".to_owned(),
            "-L".to_owned(),
            "root".to_owned(),
            "-U".to_owned(),
            ROOT_UUID.to_owned(),
            "-E".to_owned(),
            format!("offset={},hash_seed={ROOT_UUID}", root_start * SECTOR),
            "-d".to_owned(),
        ],
    );
    ext4.arg(tree).arg(raw).arg(format!("{root_kib}k"));
    run_logged(ext4, log)
}

/// Copies SYSLINUX's MBR code into the first sector, leaving the partition
/// table sfdisk wrote intact.
fn write_mbr_code(raw: &Path) -> Result<()> {
    let code = std::fs::read(MBR_CODE).with_context(|| format!("cannot read {MBR_CODE}"))?;
    anyhow::ensure!(
        code.len() <= MBR_CODE_MAX,
        "{MBR_CODE} is {} bytes, more than an MBR's {MBR_CODE_MAX}",
        code.len()
    );
    let mut disk = std::fs::OpenOptions::new()
        .write(true)
        .open(raw)
        .with_context(|| format!("cannot open {}", raw.display()))?;
    disk.seek(SeekFrom::Start(0))?;
    disk.write_all(&code)?;
    Ok(())
}

/// Converts the raw disk to a compressed qcow2.
pub fn to_qcow2(raw: &Path, image: &Path, log: &Path) -> Result<()> {
    let mut c = cmd("qemu-img", ["convert", "-c", "-f", "raw", "-O", "qcow2"]);
    c.arg(raw).arg(image);
    run_logged(c, log)
}

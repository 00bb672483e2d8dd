//! Disk images made with `qemu-img`, for tests that need a real qcow2 file
//! (an image to serve, an overlay QEMU can open).

use std::path::Path;
use std::process::Command;

/// Creates an empty qcow2 image of `virtual_size` (`64M`, `3G`...) at
/// `path`.
///
/// # Panics
/// When qemu-img cannot run or fails (with its standard error).
pub fn create_qcow2(path: &Path, virtual_size: &str) {
    crate::run::stdout(
        Command::new("qemu-img")
            .args(["create", "-q", "-f", "qcow2"])
            .arg(path)
            .arg(virtual_size),
    );
}

/// The bytes of an empty qcow2 image of `virtual_size`.
pub fn qcow2_bytes(virtual_size: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.qcow2");
    create_qcow2(&path, virtual_size);
    std::fs::read(&path).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_qcow2_starts_with_its_magic() {
        assert!(qcow2_bytes("1M").starts_with(b"QFI\xfb"));
    }
}

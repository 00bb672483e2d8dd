//! Reading the files a dial needs (the private key, known_hosts), bounded in
//! size so that a key path pointing at the wrong file cannot exhaust memory.

use std::io;
use std::path::Path;

use tokio::io::AsyncReadExt;

/// The largest private key file read (1 MiB; a 16384-bit RSA key is
/// about 13 KiB).
pub(crate) const MAX_KEY_FILE: u64 = 1 << 20;

/// The largest known_hosts file read (16 MiB).
pub(crate) const MAX_KNOWN_HOSTS: u64 = 16 << 20;

/// Reads `path` as UTF-8 text of at most `limit` bytes.
///
/// A larger file or one that is not UTF-8 is an `InvalidData` error whose
/// message names neither the file's contents nor any part of them.
pub(crate) async fn read_text(path: &Path, limit: u64) -> io::Result<String> {
    let file = tokio::fs::File::open(path).await?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .await?;
    if u64::try_from(bytes.len()).map_or(true, |n| n > limit) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {limit} bytes"),
        ));
    }
    String::from_utf8(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_up_to_the_limit_and_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "0123456789").unwrap();
        assert_eq!(read_text(&path, 10).await.unwrap(), "0123456789");
        let e = read_text(&path, 9).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert_eq!(e.to_string(), "larger than 9 bytes");
        std::fs::write(&path, [b'k', 0xff, b'y']).unwrap();
        let e = read_text(&path, 10).await.unwrap_err();
        assert_eq!(e.to_string(), "not UTF-8 text");
        let e = read_text(&dir.path().join("absent"), 10).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}

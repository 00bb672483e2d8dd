//! Serves the proxy guest image over HTTP on loopback, so the provider
//! fetches it like any user image (URL + sha256 in its config).
//!
//! Debian's python3 `http.server` (threaded) serves the image's cache
//! directory, read-only, on 127.0.0.1 at a free port; `down` stops it with
//! the sandbox's other recorded processes.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};
use sandbox_kit::GuestImage;

use crate::util::{cmd, output};
use crate::util::{free_port, wait_until_within};

const READY: Duration = Duration::from_secs(15);

/// Starts the server for `image` (its sha256 given); pushes the process onto
/// `started` as soon as it runs.
pub fn start(
    run_dir: &Path,
    image: &Path,
    sha256: &str,
    started: &mut Vec<(String, u32)>,
) -> Result<GuestImage> {
    use std::os::unix::process::CommandExt;
    let dir = image.parent().context("the image path has no directory")?;
    let name = image
        .file_name()
        .and_then(|n| n.to_str())
        .context("the image file name is not UTF-8")?;
    let bytes = std::fs::metadata(image)
        .with_context(|| format!("cannot read {}", image.display()))?
        .len();
    let port = free_port()?;
    let log = std::fs::File::create(run_dir.join("image-server.log"))?;
    let child = Command::new("python3")
        .args(["-m", "http.server", "--bind", "127.0.0.1", "--directory"])
        .arg(dir)
        .arg(port.to_string())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .spawn()
        .context("cannot start python3's http.server")?;
    started.push(("python3".into(), child.id()));
    let url = format!("http://127.0.0.1:{port}/{name}");
    wait_until_within("the image server", READY, || {
        Ok(output(cmd("curl", ["-sfI", &url]))?.status.success())
    })?;
    Ok(GuestImage {
        path: image.to_owned(),
        sha256: sha256.to_owned(),
        bytes,
        url,
    })
}

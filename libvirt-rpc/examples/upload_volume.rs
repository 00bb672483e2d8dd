//! Upload a local file into a storage volume, printing progress.
//!
//! ```text
//! cargo run --example upload_volume -- [--uri URI] POOL VOLUME FILE
//! ```
//!
//! Creates `VOLUME` in `POOL` (a raw volume the size of `FILE`) unless it
//! exists, then streams `FILE` into it. `URI` is a connection URI
//! (default `qemu:///system`; `?socket=PATH` names a local daemon's socket).
//! If reading the file fails midway, the upload is aborted on the wire:
//! the daemon never takes a short upload for a finished one.
//!
//! ```text
//! created volume disk.img in pool default
//! uploaded 4.0 MiB of 16.0 MiB (25%)
//! ...
//! uploaded 16.0 MiB of 16.0 MiB (100%)
//! done: 16777216 bytes into /var/lib/libvirt/images/disk.img
//! ```

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use libvirt_rpc::{Client, ConnectOptions, StorageVolCreateFlags, StorageVolStreamFlags, Uri};
use tokio::io::AsyncReadExt;

/// Bytes read from the file per send (the connection splits them into
/// libvirt's 256 KiB stream packets).
const CHUNK: usize = 1 << 20;

/// Progress is printed every this many percent.
const PROGRESS_STEP: u64 = 25;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("upload_volume: {}", chain(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Uploads the file `args` name, writing progress to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let usage = "usage: upload_volume [--uri URI] POOL VOLUME FILE";
    let (uri, rest) = match args {
        [flag, uri, rest @ ..] if flag == "--uri" => (uri.as_str(), rest),
        rest => ("qemu:///system", rest),
    };
    let [pool_name, vol_name, path] = rest else {
        return Err(usage.into());
    };

    let mut file = tokio::fs::File::open(path).await?;
    let len = file.metadata().await?.len();
    let client = connect(uri).await?;
    let pool = client.storage_pool_lookup_by_name(pool_name).await?;
    let vol = match client.storage_vol_lookup_by_name(&pool, vol_name).await {
        Ok(vol) => vol,
        Err(e) if e.is_not_found() => {
            let xml = format!(
                "<volume><name>{}</name><capacity unit='bytes'>{len}</capacity>\
                 <target><format type='raw'/></target></volume>",
                xml_escape(vol_name)
            );
            let vol = client
                .storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
                .await?;
            writeln!(out, "created volume {vol_name} in pool {pool_name}")?;
            vol
        }
        Err(e) => return Err(e.into()),
    };

    // Sending by hand to report progress; `Client::storage_vol_upload`
    // does the same loop for any `AsyncRead` in one call.
    let mut upload = client
        .storage_vol_upload_stream(&vol, 0, len, StorageVolStreamFlags::empty())
        .await?;
    let mut buf = vec![0u8; CHUNK];
    let mut reported = 0;
    while upload.sent() < len {
        // Never more than declared, even if the file grew meanwhile.
        let want = usize::try_from(len - upload.sent()).map_or(CHUNK, |left| left.min(CHUNK));
        let n = file.read(&mut buf[..want]).await?; // an error drops `upload`: aborted
        if n == 0 {
            return Err(format!("{path} ended at {} of {len} bytes", upload.sent()).into());
        }
        upload.send(&buf[..n]).await?;
        let percent = upload.sent() * 100 / len;
        if percent >= reported + PROGRESS_STEP || upload.sent() == len {
            reported = percent - percent % PROGRESS_STEP;
            writeln!(
                out,
                "uploaded {} of {} ({percent}%)",
                mib(upload.sent()),
                mib(len)
            )?;
        }
    }
    upload.finish().await?;
    let target = client.storage_vol_get_path(&vol).await?;
    writeln!(out, "done: {len} bytes into {target}")?;
    client.close().await;
    Ok(())
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

/// Escapes text for an XML element.
fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Connects to the daemon `uri` names (`Client::connect_uri`: a local
/// socket, `+tcp`, or `+tls` with the `tls` feature).
async fn connect(uri: &str) -> Result<Client, Box<dyn Error>> {
    let uri: Uri = uri.parse()?;
    Ok(Client::connect_uri(&uri, &ConnectOptions::new()).await?)
}

/// An error and its sources, each said once.
fn chain(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

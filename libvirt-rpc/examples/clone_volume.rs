//! Copy a storage volume into a new one through this program — what
//! `virsh vol-download POOL SRC - | virsh vol-upload POOL DST -` does, in
//! one pass: the download is an `AsyncRead`, the upload an `AsyncWrite`,
//! and `tokio::io::copy` joins them (any tokio reader or writer — a file,
//! a socket, a hasher — plugs in the same way).
//!
//! ```text
//! cargo run --example clone_volume -- [--uri URI] POOL SOURCE COPY
//! ```
//!
//! `COPY` is created in `POOL` as a raw volume of `SOURCE`'s capacity; it
//! must not exist. If either stream fails, both are aborted on the wire
//! and `COPY` is deleted: a short copy never stays behind looking whole.
//!
//! ```text
//! copied 16777216 bytes: images/base.img -> images/base-copy.img
//! ```

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use libvirt_rpc::{
    Client, ConnectOptions, StorageVolCreateFlags, StorageVolDeleteFlags, StorageVolStreamFlags,
    Uri,
};
use tokio::io::AsyncWriteExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args, &mut std::io::stdout()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("clone_volume: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Copies the volume `args` name, writing what it did to `out`.
pub async fn run(args: &[String], out: &mut dyn Write) -> Result<(), Box<dyn Error>> {
    let (uri, rest) = match args {
        [flag, uri, rest @ ..] if flag == "--uri" => (uri.as_str(), rest),
        rest => ("qemu:///system", rest),
    };
    let [pool_name, source_name, copy_name] = rest else {
        return Err("usage: clone_volume [--uri URI] POOL SOURCE COPY".into());
    };
    let uri: Uri = uri.parse()?;
    let client = Client::connect_uri(&uri, &ConnectOptions::new()).await?;
    let pool = client.storage_pool_lookup_by_name(pool_name).await?;
    let source = client
        .storage_vol_lookup_by_name(&pool, source_name)
        .await?;
    let capacity = client.storage_vol_get_info(&source).await?.capacity;
    let xml = format!(
        "<volume><name>{}</name><capacity unit='bytes'>{capacity}</capacity>\
         <target><format type='raw'/></target></volume>",
        xml_escape(copy_name)
    );
    let copy = client
        .storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
        .await?;

    let copied = async {
        let mut reader = client
            .storage_vol_download_stream(&source, 0, 0, StorageVolStreamFlags::empty())
            .await?
            .into_reader();
        let mut writer = client
            .storage_vol_upload_stream(&copy, 0, capacity, StorageVolStreamFlags::empty())
            .await?
            .into_writer();
        let n = tokio::io::copy(&mut reader, &mut writer).await?;
        // `shutdown` finishes the upload and waits for the daemon's
        // verdict; a writer dropped before it aborts the stream.
        writer.shutdown().await?;
        Ok::<u64, Box<dyn Error>>(n)
    }
    .await;
    match copied {
        Ok(n) => writeln!(
            out,
            "copied {n} bytes: {pool_name}/{source_name} -> {pool_name}/{copy_name}"
        )?,
        Err(e) => {
            // Both streams are already aborted (dropped); remove the copy.
            let _ = client
                .storage_vol_delete(&copy, StorageVolDeleteFlags::empty())
                .await;
            client.close().await;
            return Err(e);
        }
    }
    client.close().await;
    Ok(())
}

/// `text` safe inside XML character data.
fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

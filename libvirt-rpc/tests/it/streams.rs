//! Upload and download streams against the sandbox's real `dir` pool
//! (`qemu:///system`; the test driver has no volume streams).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use testkit::Descriptor;
use testkit::bytes::pseudo_random;
use testkit::names::unique;
use testkit::tasks::alive_tasks;

use libvirt_rpc::{
    Client, Error, ErrorCode, StorageVol, StorageVolCreateFlags, StorageVolDeleteFlags,
    StorageVolStreamFlags,
};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, ReadBuf};

const MIB: u64 = 1 << 20;

/// A test volume in the sandbox pool, deleted (synchronously, with virsh)
/// when dropped, so that a failing test leaves nothing behind.
struct TestVol(StorageVol);

impl std::ops::Deref for TestVol {
    type Target = StorageVol;
    fn deref(&self) -> &StorageVol {
        &self.0
    }
}

impl Drop for TestVol {
    fn drop(&mut self) {
        let d = Descriptor::require();
        let _ = std::process::Command::new("virsh")
            .args(["-q", "-c", &d.virsh_uri(&d.libvirt.qemu_uri), "vol-delete"])
            .args(["--pool", &self.0.pool, &self.0.name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}

async fn new_volume(c: &Client, bytes: u64) -> TestVol {
    let d = Descriptor::require();
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    let name = unique("lvrpc-vol");
    TestVol(
        c.storage_vol_create_xml(
            &pool,
            &support::volume_xml(&name, bytes),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap(),
    )
}

async fn delete(c: &Client, vol: &StorageVol) {
    let _ = c
        .storage_vol_delete(vol, StorageVolDeleteFlags::empty())
        .await;
}

/// A source that yields `good` bytes of data, then fails.
struct FailingSource {
    data: Vec<u8>,
    pos: usize,
    fail_at: usize,
}

impl AsyncRead for FailingSource {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.pos >= self.fail_at {
            return Poll::Ready(Err(io::Error::other("source broke")));
        }
        let n = buf.remaining().min(self.fail_at - self.pos);
        let start = self.pos;
        buf.put_slice(&self.data[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

async fn download_all(c: &Client, vol: &StorageVol) -> Vec<u8> {
    let mut out = Vec::new();
    c.storage_vol_download(vol, 0, 0, StorageVolStreamFlags::empty(), &mut out)
        .await
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_download_64_mib_round_trip_keeps_sha256() {
    let c = support::qemu().await;
    let size = 64 * MIB;
    let vol = new_volume(&c, size).await;
    let data = pseudo_random(size as usize, 64);
    let sent = c
        .storage_vol_upload(&vol, 0, size, StorageVolStreamFlags::empty(), &data[..])
        .await
        .unwrap();
    assert_eq!(sent, size);
    let back = download_all(&c, &vol).await;
    assert_eq!(back.len() as u64, size);
    assert_eq!(
        hex::encode(Sha256::digest(&back)),
        hex::encode(Sha256::digest(&data))
    );
    delete(&c, &vol).await;
    c.close().await;
}

async fn source_error_case(fail_at: usize) {
    let c = support::qemu().await;
    let size = 2 * MIB;
    let vol = new_volume(&c, size).await;
    let tasks_before = alive_tasks();
    let src = FailingSource {
        data: pseudo_random(size as usize, 7),
        pos: 0,
        fail_at,
    };
    let t0 = Instant::now();
    let r = c
        .storage_vol_upload(&vol, 0, size, StorageVolStreamFlags::empty(), src)
        .await;
    let took = t0.elapsed();
    match r {
        Err(Error::Source(e)) => assert_eq!(e.to_string(), "source broke"),
        other => panic!("expected the source's error, got {other:?}"),
    }
    assert!(took < Duration::from_secs(1), "error took {took:?}");
    // The same client keeps working.
    let info = c.storage_vol_get_info(&vol).await.unwrap();
    assert_eq!(info.capacity, size);
    assert_eq!(alive_tasks(), tasks_before, "a task was left behind");
    delete(&c, &vol).await;
    c.close().await;
}

#[tokio::test]
async fn upload_source_error_at_byte_0_aborts_stream() {
    source_error_case(0).await;
}

#[tokio::test]
async fn upload_source_error_mid_chunk_aborts_stream() {
    source_error_case(3 * 262_120 + 1000).await;
}

#[tokio::test]
async fn upload_source_error_on_last_chunk_aborts_stream() {
    source_error_case(2 * MIB as usize - 10).await;
}

#[tokio::test]
async fn upload_source_short_is_aborted_not_finished() {
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    let data = pseudo_random(1000, 3);
    let r = c
        .storage_vol_upload(&vol, 0, MIB, StorageVolStreamFlags::empty(), &data[..])
        .await;
    assert!(
        matches!(r, Err(Error::LengthMismatch { declared, got: 1000 }) if declared == MIB),
        "{r:?}"
    );
    c.connect_get_lib_version().await.unwrap();
    delete(&c, &vol).await;
    c.close().await;
}

/// Settles what libvirtd 11 does when an upload is finished before its
/// declared length: it accepts it (the docs of `libvirt_rpc::stream` say
/// so; if this test fails, update them).
#[tokio::test]
async fn upload_finished_short_is_accepted_by_libvirtd() {
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    let mut up = c
        .storage_vol_upload_stream(&vol, 0, MIB, StorageVolStreamFlags::empty())
        .await
        .unwrap();
    up.send(&[0xAB; 4096]).await.unwrap();
    let r = up.finish().await;
    assert!(r.is_ok(), "libvirtd rejected a short finish: {r:?}");
    let back = download_all(&c, &vol).await;
    assert!(back[..4096].iter().all(|&b| b == 0xAB));
    delete(&c, &vol).await;
    c.close().await;
}

#[tokio::test]
async fn download_of_missing_volume_is_not_found_and_client_survives() {
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    delete(&c, &vol).await;
    let mut sink = Vec::new();
    let r = c
        .storage_vol_download(&vol, 0, 0, StorageVolStreamFlags::empty(), &mut sink)
        .await;
    let e = r.unwrap_err();
    assert!(e.code().is_some(), "{e:?}");
    assert_eq!(e.code(), Some(ErrorCode::NoStorageVol), "{e:?}");
    c.connect_get_lib_version().await.unwrap();
    c.close().await;
}

#[tokio::test]
async fn dropping_an_upload_aborts_it_and_client_keeps_working() {
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    let mut up = c
        .storage_vol_upload_stream(&vol, 0, MIB, StorageVolStreamFlags::empty())
        .await
        .unwrap();
    up.send(&[1; 1000]).await.unwrap();
    drop(up);
    for _ in 0..5 {
        c.connect_get_lib_version().await.unwrap();
    }
    // A second upload on the same client works.
    let data = pseudo_random(MIB as usize, 5);
    c.storage_vol_upload(&vol, 0, MIB, StorageVolStreamFlags::empty(), &data[..])
        .await
        .unwrap();
    assert_eq!(download_all(&c, &vol).await, data);
    delete(&c, &vol).await;
    c.close().await;
}

/// A download consumer slower than the link: the connection parks packets
/// (stream_queue = 1) instead of buffering without bound, and every byte
/// still arrives, including frames buffered behind a parked one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_download_consumer_gets_every_byte() {
    // A stalled reader shows as a chunk deadline passing (the daemon's own
    // keepalive PING, every 5 s, would otherwise unstick it).
    let config = libvirt_rpc::Config::default()
        .call_timeout(Duration::from_secs(3))
        .stream_queue(1);
    let c = support::connect_uri(&Descriptor::require().libvirt.qemu_uri, config).await;
    let size = 4 * MIB;
    let vol = new_volume(&c, size).await;
    let data = pseudo_random(size as usize, 11);
    c.storage_vol_upload(&vol, 0, size, StorageVolStreamFlags::empty(), &data[..])
        .await
        .unwrap();
    let mut down = c
        .storage_vol_download_stream(&vol, 0, 0, StorageVolStreamFlags::empty())
        .await
        .unwrap();
    // Other callers of the same connection are delayed by the paused
    // reader, not lost.
    let caller = {
        let c = c.clone();
        tokio::spawn(async move {
            for _ in 0..20 {
                c.connect_get_lib_version().await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut got = Vec::new();
    while let Some(chunk) = down.chunk().await.unwrap() {
        got.extend_from_slice(&chunk);
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    caller.await.unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "downloaded bytes differ");
    delete(&c, &vol).await;
    c.close().await;
}

#[tokio::test]
async fn download_as_async_reader() {
    use tokio::io::AsyncReadExt;
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    let data = pseudo_random(MIB as usize, 13);
    c.storage_vol_upload(&vol, 0, MIB, StorageVolStreamFlags::empty(), &data[..])
        .await
        .unwrap();
    let mut reader = c
        .storage_vol_download_stream(&vol, 0, 0, StorageVolStreamFlags::empty())
        .await
        .unwrap()
        .into_reader();
    let mut got = Vec::new();
    reader.read_to_end(&mut got).await.unwrap();
    assert!(got == data);
    // Dropping a reader mid-stream aborts it; the client keeps working.
    let mut reader = c
        .storage_vol_download_stream(&vol, 0, 0, StorageVolStreamFlags::empty())
        .await
        .unwrap()
        .into_reader();
    let mut first = [0u8; 100];
    reader.read_exact(&mut first).await.unwrap();
    assert_eq!(&first[..], &data[..100]);
    drop(reader);
    c.connect_get_lib_version().await.unwrap();
    delete(&c, &vol).await;
    c.close().await;
}

/// An upload as an `AsyncWrite`: `tokio::io::copy` into it, `shutdown`
/// finishes it, every byte arrives; dropped before `shutdown`, it aborts
/// the stream and the client keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_as_async_writer() {
    use tokio::io::AsyncWriteExt;
    let c = support::qemu().await;
    let vol = new_volume(&c, MIB).await;
    let data = pseudo_random(MIB as usize, 17);
    let mut writer = c
        .storage_vol_upload_stream(&vol, 0, MIB, StorageVolStreamFlags::empty())
        .await
        .unwrap()
        .into_writer();
    // Odd-sized writes (not the stream's chunk size), then the verdict.
    for part in data.chunks(100_003) {
        writer.write_all(part).await.unwrap();
    }
    writer.flush().await.unwrap();
    writer.shutdown().await.unwrap();
    assert!(download_all(&c, &vol).await == data);
    // A write after shutdown is refused, not lost silently.
    assert!(writer.write_all(b"late").await.is_err());

    let other = pseudo_random(MIB as usize, 18);
    let mut writer = c
        .storage_vol_upload_stream(&vol, 0, MIB, StorageVolStreamFlags::empty())
        .await
        .unwrap()
        .into_writer();
    writer.write_all(&other[..4096]).await.unwrap();
    drop(writer);
    c.connect_get_lib_version().await.unwrap();
    delete(&c, &vol).await;
    c.close().await;
}

/// A sink that accepts `limit` bytes, then fails.
struct FailingSink {
    written: usize,
    limit: usize,
}

impl tokio::io::AsyncWrite for FailingSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.written >= self.limit {
            return Poll::Ready(Err(io::Error::other("sink broke")));
        }
        let n = buf.len().min(self.limit - self.written);
        self.written += n;
        Poll::Ready(Ok(n))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn download_sink_error_aborts_stream_and_client_keeps_working() {
    let c = support::qemu().await;
    let size = 4 * MIB;
    let vol = new_volume(&c, size).await;
    let tasks_before = alive_tasks();
    let t0 = Instant::now();
    let sink = FailingSink {
        written: 0,
        limit: MIB as usize + 123,
    };
    let r = c
        .storage_vol_download(&vol, 0, 0, StorageVolStreamFlags::empty(), sink)
        .await;
    match r {
        Err(Error::Sink(e)) => assert_eq!(e.to_string(), "sink broke"),
        other => panic!("expected the sink's error, got {other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    c.connect_get_lib_version().await.unwrap();
    // A full download on the same client still works.
    assert_eq!(download_all(&c, &vol).await.len() as u64, size);
    assert_eq!(alive_tasks(), tasks_before);
    delete(&c, &vol).await;
    c.close().await;
}

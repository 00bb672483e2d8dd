//! Daemon-side failures, against a libvirtd of the test's own (see
//! `testkit::libvirtd`): the shared sandbox daemon must never be
//! killed, and libvirtd 11.3 was seen to die after an upload overflowed its
//! declared length.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use testkit::names::unique;
use testkit::tasks::alive_tasks;

use libvirt_rpc::{Client, Error, StorageVol, StorageVolCreateFlags, StorageVolStreamFlags};
use testkit::libvirtd::{POOL, PrivateLibvirtd, STORAGE_URI};
use tokio::io::{AsyncRead, ReadBuf};

async fn volume(c: &Client, bytes: u64) -> StorageVol {
    let pool = c.storage_pool_lookup_by_name(POOL).await.unwrap();
    let name = unique("lvrpc-dvol");
    let xml = format!(
        "<volume><name>{name}</name><capacity unit='bytes'>{bytes}</capacity>\
         <allocation unit='bytes'>0</allocation><target><format type='raw'/></target></volume>"
    );
    c.storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
        .await
        .unwrap()
}

/// Yields data forever.
struct Endless;
impl AsyncRead for Endless {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = buf.remaining().min(64 * 1024);
        buf.put_slice(&vec![1u8; n]);
        Poll::Ready(Ok(()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_length_exceeded_fails_promptly_with_no_task_left() {
    let mut d = PrivateLibvirtd::start();
    // libvirtd 11.3 can go silent on a client whose upload overflowed (no
    // error packet, no PONG): a short keepalive turns that into a prompt
    // Disconnected instead of a 30 s wait.
    let config = libvirt_rpc::Config::default().keepalive(Duration::from_millis(150), 2);
    let c = support::connect(&d, STORAGE_URI, config).await;
    drop(support::storage(&d).await); // makes sure the pool exists
    let vol = volume(&c, 1 << 20).await;
    let tasks_before = alive_tasks();
    let t0 = Instant::now();
    // Declare 1 MiB and send 4 MiB: the daemon fails the stream.
    let mut up = c
        .storage_vol_upload_stream(&vol, 0, 1 << 20, StorageVolStreamFlags::empty())
        .await
        .unwrap();
    let mut r = up.send(&vec![7u8; 4 << 20]).await;
    if r.is_ok() {
        r = up.finish().await;
    } else {
        drop(up);
    }
    let took = t0.elapsed();
    eprintln!("overflowed upload: {r:?} after {took:?}");
    // libvirtd reports the overflow (ENOSPC from its fd stream) by failing
    // the stream, or (11.3, seen here) drops or wedges the client, which
    // keepalive detects.
    assert!(
        matches!(r, Err(Error::Libvirt(_)) | Err(Error::Disconnected(_))),
        "{r:?}"
    );
    assert!(took < Duration::from_secs(1), "{took:?}");
    if d.alive() && !c.is_closed() {
        c.connect_get_lib_version().await.unwrap();
    }
    // No new task; the connection task itself is gone if the daemon
    // dropped the link.
    assert!(alive_tasks() <= tasks_before, "a task was left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_daemon_fails_ten_calls_and_upload_with_disconnected() {
    let mut d = PrivateLibvirtd::start();
    let c = support::storage(&d).await;
    let vol = volume(&c, 1 << 40).await;
    let tasks_before = alive_tasks();
    let up = {
        let c = c.clone();
        tokio::spawn(async move {
            c.storage_vol_upload(&vol, 0, 0, StorageVolStreamFlags::empty(), Endless)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Freeze the daemon so that the calls below are surely in flight.
    d.signal("-STOP");
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let c = c.clone();
            tokio::spawn(async move { c.connect_get_lib_version().await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    d.kill();
    let bound = Duration::from_secs(1);
    for call in calls {
        let r = tokio::time::timeout(bound, call)
            .await
            .expect("call ended")
            .unwrap();
        assert!(matches!(r, Err(Error::Disconnected(_))), "{r:?}");
    }
    let r = tokio::time::timeout(bound, up)
        .await
        .expect("upload ended")
        .unwrap();
    assert!(matches!(r, Err(Error::Disconnected(_))), "{r:?}");
    assert!(t0.elapsed() < bound, "{:?}", t0.elapsed());
    assert!(c.is_closed());
    assert!(c.closed().await.to_string().len() > 3);
    // Only the test's own tasks are gone too: the connection task ended.
    drop(c);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(alive_tasks() < tasks_before, "connection task still alive");
}

/// Pins what libvirtd 11.3 does when a `dir` volume is deleted during an
/// upload (documented in `libvirt_rpc::stream`): the delete succeeds and the
/// upload keeps writing into the unlinked file, with no error. Aborting the
/// upload (dropping it) still ends it promptly with no task left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_deleted_mid_upload_is_not_reported_by_libvirtd() {
    let d = PrivateLibvirtd::start();
    let c = support::storage(&d).await;
    let vol = volume(&c, 1 << 40).await;
    let tasks_before = alive_tasks();
    let mut upload = {
        let c = c.clone();
        let vol = vol.clone();
        tokio::spawn(async move {
            c.storage_vol_upload(&vol, 0, 0, StorageVolStreamFlags::empty(), Endless)
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = support::storage(&d).await;
    other
        .storage_vol_delete(&vol, libvirt_rpc::StorageVolDeleteFlags::empty())
        .await
        .unwrap();
    let still = tokio::time::timeout(Duration::from_millis(700), &mut upload).await;
    assert!(
        still.is_err(),
        "libvirtd now reports the deletion: {still:?}"
    );
    upload.abort();
    let _ = upload.await;
    other.close().await;
    // The aborted upload's stream was aborted on the wire; the link is fine.
    c.connect_get_lib_version().await.unwrap();
    assert!(alive_tasks() <= tasks_before);
}

/// A download whose consumer stalls stops the connection's reading (the
/// stream queue is full); libvirtd's own keepalive counts the client's
/// silence and drops it after interval × count. The connection keeps
/// PINGing while paused, so the link outlives a stall longer than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_whose_consumer_stalls_keeps_its_link() {
    // The daemon drops a client it has heard nothing from for ~2 s.
    let d = PrivateLibvirtd::start_with("keepalive_interval = 1\nkeepalive_count = 1\n");
    drop(support::storage(&d).await); // makes sure the pool exists
    let config = libvirt_rpc::Config::default()
        .keepalive(Duration::from_millis(400), 3)
        .stream_queue(2);
    let c = support::connect(&d, STORAGE_URI, config).await;
    let size = 16u64 << 20;
    let vol = volume(&c, size).await;
    let mut down = c
        .storage_vol_download_stream(&vol, 0, size, StorageVolStreamFlags::empty())
        .await
        .unwrap();
    let mut got = down.chunk().await.unwrap().map_or(0, |b| b.len() as u64);
    // The consumer stalls for well over the daemon's patience.
    tokio::time::sleep(Duration::from_secs(5)).await;
    while let Some(chunk) = down.chunk().await.unwrap() {
        got += chunk.len() as u64;
    }
    assert_eq!(got, size);
    assert!(
        c.connect_get_lib_version().await.is_ok(),
        "the link is alive"
    );
    c.close().await;
}

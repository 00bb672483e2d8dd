//! Client behaviour against the `testing` kit's fake daemon (no sandbox
//! needed): the cases a real libvirtd will not produce on demand. Scripted
//! where a script says it ([`Script`]), packet by packet ([`DaemonEnd`])
//! where timing between packets is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use libvirt_rpc::proto::packet::{
    self, Header, KEEPALIVE_PING, KEEPALIVE_PONG, KEEPALIVE_PROGRAM, KEEPALIVE_VERSION,
    MessageType, Status,
};
use libvirt_rpc::testing::{DaemonEnd, Reply, Script, UploadOutcome};
use libvirt_rpc::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn sasl_only_daemon_gives_unsupported_auth() {
    let (io, daemon) = Script::new().auth(&[AuthType::Sasl]).start();
    let r = Client::connect(io, "qemu:///system", OpenFlags::empty(), Config::default()).await;
    match r {
        Err(e @ Error::UnsupportedAuth { .. }) => {
            assert!(e.to_string().contains("unsupported"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(daemon.procedures(), [proc_num::AUTH_LIST]);
}

#[tokio::test]
async fn polkit_only_daemon_gets_the_polkit_call_before_the_open() {
    let (io, daemon) = Script::new().auth(&[AuthType::Polkit]).start();
    let c = Client::connect(io, "qemu:///system", OpenFlags::empty(), Config::default())
        .await
        .unwrap();
    c.close().await;
    assert_eq!(
        daemon.procedures(),
        [
            proc_num::AUTH_LIST,
            proc_num::AUTH_POLKIT,
            proc_num::CONNECT_SUPPORTS_FEATURE,
            proc_num::CONNECT_OPEN
        ]
    );
}

#[tokio::test]
async fn polkit_refusal_is_auth_refused_and_nothing_is_opened() {
    // What libvirtd 11.3 answers when polkit says no (seen by
    // tests/it/polkit.rs): VIR_ERR_AUTH_FAILED from VIR_FROM_POLKIT.
    let script = Script::new()
        .reply(
            proc_num::AUTH_POLKIT,
            Reply::error(
                ErrorCode::AuthFailed,
                ErrorDomain::Polkit,
                "authentication failed: access denied by policy",
            ),
        )
        .auth(&[AuthType::Polkit]);
    let (io, daemon) = script.start();
    let e = Client::connect(io, "qemu:///system", OpenFlags::empty(), Config::default())
        .await
        .unwrap_err();
    match &e {
        Error::AuthRefused { method, reason } => {
            assert_eq!(*method, AuthType::Polkit);
            assert_eq!(reason.code, ErrorCode::AuthFailed);
            assert!(reason.message.contains("denied by policy"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!e.is_transient());
    assert!(e.to_string().contains("refused"), "{e}");
    assert_eq!(
        daemon.procedures(),
        [proc_num::AUTH_LIST, proc_num::AUTH_POLKIT]
    );
}

/// A keepalive PING, as the daemon sends it.
fn ping_header() -> Header {
    Header {
        program: KEEPALIVE_PROGRAM,
        version: KEEPALIVE_VERSION,
        procedure: KEEPALIVE_PING,
        kind: MessageType::Message,
        serial: 0,
        status: Status::Ok,
    }
}

#[tokio::test]
async fn daemon_ping_is_answered_with_pong() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(io, Config::default());
    fake.send_raw(&ping_header(), &[]).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(1), fake.read())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(pong.header.program, KEEPALIVE_PROGRAM);
    assert_eq!(pong.header.procedure, KEEPALIVE_PONG);
    drop(c);
}

#[tokio::test]
async fn garbage_from_daemon_kills_the_link_with_protocol_error() {
    let (c, daemon) = Script::new()
        .reply(proc_num::CONNECT_GET_LIB_VERSION, Reply::Silence)
        .connect(Config::default())
        .await
        .unwrap();
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    daemon.send_bytes(&[0xff; 64]).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(1), call)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(r, Err(Error::Disconnected(DisconnectReason::Protocol(_)))),
        "{r:?}"
    );
}

#[tokio::test]
async fn reply_of_the_wrong_type_is_a_decode_error_not_a_panic() {
    let (c, _daemon) = Script::new()
        // A string length of 4 GiB.
        .reply(proc_num::CONNECT_GET_HOSTNAME, Reply::ok(&0xffff_ffffu32))
        .reply(proc_num::CONNECT_GET_LIB_VERSION, Reply::ok(&11_003_000u64))
        .connect(Config::default())
        .await
        .unwrap();
    let r = c.connect_get_hostname().await;
    assert!(matches!(r, Err(Error::Decode { .. })), "{r:?}");
    // The link is still fine.
    assert_eq!(c.connect_get_lib_version().await.unwrap(), 11_003_000);
}

/// The reader never waits for a slow subscriber: events beyond its queue are
/// dropped and counted while calls keep being answered.
#[tokio::test]
async fn slow_event_consumer_never_blocks_calls() {
    let (c, daemon) = Script::new()
        .reply(proc_num::CONNECT_GET_LIB_VERSION, Reply::ok(&1u64))
        .connect(Config::default().event_queue(4))
        .await
        .unwrap();
    let mut sub = c.subscribe_lifecycle(None).await.unwrap();
    let ev = LifecycleEvent {
        dom: Domain {
            name: "d".into(),
            uuid: [1; 16],
            id: 1,
        },
        event: LifecycleEventKind::Started,
        detail: 0,
    };
    for _ in 0..100 {
        assert_eq!(daemon.emit_lifecycle(&ev).await.unwrap(), 1);
    }
    // Its reply comes after the 100 events on the link.
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(1), c.connect_get_lib_version())
            .await
            .unwrap()
            .unwrap(),
        1
    );
    assert_eq!(sub.missed(), 96);
    for _ in 0..4 {
        assert_eq!(sub.recv().await.unwrap(), ev);
    }
}

/// libvirtd sends a download's data from its event loop while a worker
/// sends the REPLY: under load the first data packet overtakes the reply
/// (seen with 11.3 in `slow_download_consumer_gets_every_byte`). The data
/// is kept, in order, not taken for a broken reply.
#[tokio::test]
async fn download_data_ahead_of_its_reply_is_kept_in_order() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(io, Config::default());
    let daemon = tokio::spawn(async move {
        let call = fake.read().await.unwrap().unwrap();
        assert_eq!(call.header.procedure, proc_num::STORAGE_VOL_DOWNLOAD);
        let data = |status| stream_header(&call.header, status);
        fake.send_raw(&data(Status::Continue), b"early ")
            .await
            .unwrap();
        fake.reply(&call.header, &()).await.unwrap();
        fake.send_raw(&data(Status::Continue), b"late")
            .await
            .unwrap();
        fake.send_raw(&data(Status::Continue), b"").await.unwrap(); // EOF
        let finish = fake.read().await.unwrap().unwrap();
        assert_eq!(
            (finish.header.kind, finish.header.status),
            (MessageType::Stream, Status::Ok)
        );
        fake.send_raw(&data(Status::Ok), b"").await.unwrap();
        fake
    });
    let mut down = tokio::time::timeout(
        Duration::from_secs(5),
        c.open_download(proc_num::STORAGE_VOL_DOWNLOAD, &0u32),
    )
    .await
    .unwrap()
    .unwrap();
    let mut got = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), down.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        got.extend_from_slice(&chunk);
    }
    assert_eq!(got, b"early late");
    drop(daemon.await.unwrap());
    drop(c);
}

#[tokio::test]
async fn a_ping_flood_from_a_peer_that_does_not_read_queues_few_pongs() {
    // The client's writes back up after 64 KiB in the pipe; its own queue
    // holds 64 KiB more.
    let (io, fake) = DaemonEnd::pair_with_capacity(64 << 10);
    let config = Config::default().outgoing_buffer(64 << 10);
    let c = Client::new(io, config);
    let ping = packet::encode_raw(&ping_header(), &[]).unwrap();
    const PINGS: usize = 100_000;
    let flood: Vec<u8> = ping
        .iter()
        .copied()
        .cycle()
        .take(ping.len() * PINGS)
        .collect();
    // Write the whole flood without reading a byte.
    let (mut rd, mut wr) = tokio::io::split(fake.into_io());
    tokio::time::timeout(Duration::from_secs(10), wr.write_all(&flood))
        .await
        .expect("the client keeps reading")
        .unwrap();
    // Now drain what the client queued: a bounded number of PONGs.
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    while let Ok(Ok(n)) =
        tokio::time::timeout(Duration::from_millis(300), rd.read(&mut chunk)).await
    {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
    }
    let pongs = out.len() / ping.len();
    assert!(pongs > 0, "PINGs are answered");
    assert!(
        pongs < PINGS / 10,
        "{pongs} PONGs queued for {PINGS} PINGs: the queue grew with the flood"
    );
    // The link still works.
    let mut fake = DaemonEnd::from_io(rd.unsplit(wr));
    let call = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    let req = loop {
        let p = fake.read().await.unwrap().unwrap();
        if p.header.program != KEEPALIVE_PROGRAM {
            break p;
        }
    };
    fake.reply(&req.header, &11_003_000u64).await.unwrap();
    assert_eq!(call.await.unwrap().unwrap(), 11_003_000);
}

fn vol() -> StorageVol {
    StorageVol {
        pool: "p".into(),
        name: "v".into(),
        key: "/p/v".into(),
    }
}

/// Asserts that no stream packet for `serial` arrives for a while: an abort
/// sent before the daemon's REPLY is useless (libvirtd drops stream packets
/// for a serial it has not registered).
async fn expect_no_early_abort(fake: &mut DaemonEnd, serial: u32) {
    let early = tokio::time::timeout(Duration::from_millis(300), async {
        loop {
            let p = fake.read().await.unwrap().expect("link open");
            if p.header.serial == serial && p.header.kind == MessageType::Stream {
                break p;
            }
        }
    })
    .await;
    assert!(early.is_err(), "stream packet before the open: {early:?}");
}

/// Reads packets until one is a STREAM / ERROR (an abort) for `serial`.
async fn expect_abort(fake: &mut DaemonEnd, serial: u32) {
    let abort = tokio::time::timeout(Duration::from_secs(2), async {
        loop {
            let p = fake.read().await.unwrap().expect("link open");
            if p.header.serial == serial && p.header.kind == MessageType::Stream {
                break p;
            }
        }
    })
    .await
    .expect("the stream is aborted once the daemon has opened it");
    assert_eq!(abort.header.status, Status::Error);
}

#[tokio::test]
async fn an_upload_dropped_before_the_daemon_opened_it_is_aborted_once_it_opens() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(io, Config::default());
    let upload = {
        let c = c.clone();
        tokio::spawn(async move {
            c.storage_vol_upload(
                &vol(),
                0,
                10,
                StorageVolStreamFlags::empty(),
                &b"0123456789"[..],
            )
            .await
        })
    };
    let call = fake.read().await.unwrap().unwrap();
    assert_eq!(call.header.procedure, proc_num::STORAGE_VOL_UPLOAD);
    // The caller goes away (an outer timeout, a select!) while the open is
    // in flight; then the daemon opens the stream.
    upload.abort();
    let _ = upload.await;
    expect_no_early_abort(&mut fake, call.header.serial).await;
    fake.reply(&call.header, &()).await.unwrap();
    expect_abort(&mut fake, call.header.serial).await;
}

#[tokio::test]
async fn a_download_whose_open_timed_out_is_aborted_once_it_opens() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(
        io,
        Config::default().call_timeout(Duration::from_millis(100)),
    );
    let download = {
        let c = c.clone();
        tokio::spawn(async move {
            c.storage_vol_download(
                &vol(),
                0,
                0,
                StorageVolStreamFlags::empty(),
                tokio::io::sink(),
            )
            .await
        })
    };
    let call = fake.read().await.unwrap().unwrap();
    assert!(matches!(
        download.await.unwrap(),
        Err(Error::Timeout { .. })
    ));
    expect_no_early_abort(&mut fake, call.header.serial).await;
    // The daemon answers late: the stream exists on its side now.
    fake.reply(&call.header, &()).await.unwrap();
    expect_abort(&mut fake, call.header.serial).await;
    // The link is fine.
    let next = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    let req = loop {
        let p = fake.read().await.unwrap().unwrap();
        if p.header.procedure == proc_num::CONNECT_GET_LIB_VERSION {
            break p;
        }
    };
    fake.reply(&req.header, &1u64).await.unwrap();
    assert_eq!(next.await.unwrap().unwrap(), 1);
}

#[tokio::test]
async fn an_upload_source_longer_than_declared_sends_nothing_past_the_length() {
    let (c, daemon) = Script::new()
        .reply(proc_num::STORAGE_VOL_UPLOAD, Reply::upload())
        .connect(Config::default())
        .await
        .unwrap();
    let source = vec![7u8; 3 << 20];
    let r = c
        .storage_vol_upload(&vol(), 0, 10, StorageVolStreamFlags::empty(), &source[..])
        .await;
    match r {
        Err(Error::LengthMismatch { declared, got }) => assert_eq!((declared, got), (10, 11)),
        other => panic!("{other:?}"),
    }
    let uploads = daemon.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(
        uploads[0].outcome,
        UploadOutcome::Aborted,
        "aborted, not finished"
    );
    assert!(
        uploads[0].data.len() <= 10,
        "{} bytes sent for a declared 10",
        uploads[0].data.len()
    );
}

/// The STREAM packets of `call`'s stream, with `status`.
fn stream_header(call: &Header, status: Status) -> Header {
    Header {
        kind: MessageType::Stream,
        status,
        ..*call
    }
}

/// A tunnelled migration's incoming side: the REPLY that opens the upload
/// carries the destination's cookie, returned beside the stream; the
/// stream then carries the data and finishes.
#[tokio::test]
async fn an_upload_whose_opening_reply_has_a_body_returns_both() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(io, Config::default());
    let daemon = tokio::spawn(async move {
        let call = fake.read().await.unwrap().unwrap();
        assert_eq!(
            call.header.procedure,
            proc_num::DOMAIN_MIGRATE_PREPARE_TUNNEL3
        );
        let args: remote::DomainMigratePrepareTunnel3Args =
            libvirt_rpc::proto::xdr::from_bytes(&call.payload).unwrap();
        assert_eq!(
            (&args.cookie_in[..], args.flags, args.dname.as_deref()),
            (&b"cookie-in"[..], 7, Some("incoming"))
        );
        let ret = remote::DomainMigratePrepareTunnel3Ret {
            cookie_out: b"cookie-out".to_vec(),
        };
        fake.reply(&call.header, &ret).await.unwrap();
        let data = fake.read().await.unwrap().unwrap();
        assert_eq!(
            (data.header.status, &data.payload[..]),
            (Status::Continue, &b"migration"[..])
        );
        let finish = fake.read().await.unwrap().unwrap();
        assert_eq!(finish.header.status, Status::Ok);
        fake.send_raw(&stream_header(&call.header, Status::Ok), b"")
            .await
            .unwrap();
        fake
    });
    let (cookie, mut up) = tokio::time::timeout(
        Duration::from_secs(5),
        c.domain_migrate_prepare_tunnel3(b"cookie-in", 7, Some("incoming"), 0, "<domain/>"),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(cookie, b"cookie-out");
    up.send(b"migration").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), up.finish())
        .await
        .unwrap()
        .unwrap();
    drop(daemon.await.unwrap());
}

/// A console: what the guest writes while the client sends keystrokes is
/// kept for the next `chunk` (an upload would take it for the daemon's
/// verdict and fail); the daemon's error then ends the stream.
#[tokio::test]
async fn a_duplex_stream_keeps_what_arrives_while_sending() {
    let (io, mut fake) = DaemonEnd::pair();
    let c = Client::new(io, Config::default());
    let dom = remote::Domain {
        name: "guest".into(),
        uuid: [1; 16],
        id: 1,
    };
    let daemon = tokio::spawn(async move {
        let call = fake.read().await.unwrap().unwrap();
        assert_eq!(call.header.procedure, proc_num::DOMAIN_OPEN_CONSOLE);
        fake.reply(&call.header, &()).await.unwrap();
        fake.send_raw(&stream_header(&call.header, Status::Continue), b"login: ")
            .await
            .unwrap();
        let keys = fake.read().await.unwrap().unwrap();
        assert_eq!(&keys.payload[..], b"root\n");
        fake.send_raw(&stream_header(&call.header, Status::Continue), b"# ")
            .await
            .unwrap();
        let error = remote_error_payload();
        fake.send_raw(&stream_header(&call.header, Status::Error), &error)
            .await
            .unwrap();
        fake
    });
    let mut console = tokio::time::timeout(
        Duration::from_secs(5),
        c.domain_open_console(&dom, None, DomainConsoleFlags::empty()),
    )
    .await
    .unwrap()
    .unwrap();
    // Let "login: " arrive before sending.
    tokio::time::sleep(Duration::from_millis(100)).await;
    console.send(b"root\n").await.unwrap();
    let mut got = Vec::new();
    let err = loop {
        match tokio::time::timeout(Duration::from_secs(5), console.chunk())
            .await
            .unwrap()
        {
            Ok(Some(data)) => got.extend_from_slice(&data),
            Ok(None) => panic!("end of stream instead of the daemon's error"),
            Err(e) => break e,
        }
    };
    assert_eq!(got, b"login: # ");
    assert_eq!(err.code(), Some(ErrorCode::OperationFailed), "{err}");
    assert_eq!((console.sent(), console.received()), (5, 9));
    drop(daemon.await.unwrap());
    // The connection goes on.
    assert!(!c.is_closed());
}

/// An encoded `remote_error`: the console's pty went away.
fn remote_error_payload() -> Vec<u8> {
    let e = libvirt_rpc::proto::remote_error::WireError::new(
        ErrorCode::OperationFailed.to_i32(),
        10,
        "console closed",
    );
    libvirt_rpc::proto::xdr::to_bytes(&e).unwrap().to_vec()
}

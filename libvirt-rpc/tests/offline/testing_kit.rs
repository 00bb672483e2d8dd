//! The `testing` feature itself: what a [`Script`] answers by default and
//! when told, what the [`FakeDaemon`] records, pushes and drops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use libvirt_rpc::proto::packet;
use libvirt_rpc::proto::remote_error::WireError;
use libvirt_rpc::testing::{Reply, Script, UploadOutcome};
use libvirt_rpc::*;

fn vol() -> StorageVol {
    StorageVol {
        pool: "p".into(),
        name: "v".into(),
        key: "/p/v".into(),
    }
}

fn lifecycle(name: &str) -> LifecycleEvent {
    LifecycleEvent {
        dom: Domain {
            name: name.into(),
            uuid: [9; 16],
            id: 4,
        },
        event: LifecycleEventKind::Stopped,
        detail: 1,
    }
}

/// Bounds every wait of these tests.
async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), f)
        .await
        .expect("within 10 s")
}

#[tokio::test]
async fn the_default_handshake_is_auth_none_keepalive_and_open() {
    let (c, daemon) = within(Script::new().connect(Config::default()))
        .await
        .unwrap();
    assert_eq!(
        daemon.procedures(),
        [
            proc_num::AUTH_LIST,
            proc_num::CONNECT_SUPPORTS_FEATURE,
            proc_num::CONNECT_OPEN
        ]
    );
    let open = &daemon.calls()[2];
    assert_eq!(
        open.args::<(Option<String>, u32)>().unwrap(),
        (Some(testing::FAKE_URI.to_owned()), 0)
    );
    assert!(!c.is_closed());
}

/// An unscripted call fails exactly as libvirtd 11.3 failed procedure
/// 99999 in the captured packet (code, domain and message).
#[tokio::test]
async fn an_unscripted_procedure_fails_as_libvirtd_fails_an_unknown_one() {
    let captured = include_bytes!(
        "../../testdata/packets/024-prog20008086-proc99999-typeReply-statusError.bin"
    );
    let mut buf = bytes::BytesMut::from(&captured[..]);
    let p = packet::decode_frame(&mut buf).unwrap().unwrap();
    let real: WireError = proto::xdr::from_bytes(&p.payload).unwrap();

    let (c, _daemon) = within(Script::new().connect(Config::default()))
        .await
        .unwrap();
    let e = within(c.call::<_, ()>(99999, &())).await.unwrap_err();
    let Error::Libvirt(fake) = e else {
        panic!("{e:?}")
    };
    assert_eq!(fake.code.to_i32(), real.code);
    assert_eq!(fake.error_domain().to_i32(), real.domain);
    assert_eq!(Some(fake.message), real.message);
}

#[tokio::test]
async fn a_reply_function_sees_the_arguments_and_may_answer_differently() {
    let web = Domain {
        name: "web".into(),
        uuid: [1; 16],
        id: 3,
    };
    let known = web.clone();
    let (c, daemon) = within(
        Script::new()
            .reply_with(proc_num::DOMAIN_LOOKUP_BY_NAME, move |call| {
                match call.args::<String>() {
                    Ok(name) if name == known.name => Reply::ok(&known),
                    _ => Reply::error(ErrorCode::NoDomain, ErrorDomain::Qemu, "Domain not found"),
                }
            })
            .connect(Config::default()),
    )
    .await
    .unwrap();
    assert_eq!(within(c.domain_lookup_by_name("web")).await.unwrap(), web);
    let e = within(c.domain_lookup_by_name("db")).await.unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    assert_eq!(e.code(), Some(ErrorCode::NoDomain));
    let asked: Vec<String> = daemon
        .calls()
        .iter()
        .filter(|c| c.procedure() == proc_num::DOMAIN_LOOKUP_BY_NAME)
        .map(|c| c.args().unwrap())
        .collect();
    assert_eq!(asked, ["web", "db"]);
}

#[tokio::test]
async fn a_reply_that_cannot_be_encoded_is_an_internal_error_not_a_panic() {
    let too_long = "x".repeat(proto::xdr::STRING_MAX + 1);
    let (c, _daemon) = within(
        Script::new()
            .reply(proc_num::CONNECT_GET_HOSTNAME, Reply::ok(&too_long))
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let e = within(c.connect_get_hostname()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InternalError), "{e:?}");
    assert!(e.to_string().contains("cannot encode"), "{e}");
}

#[tokio::test]
async fn a_download_delivers_every_byte_over_several_packets() {
    let data: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
    let (c, _daemon) = within(
        Script::new()
            .reply(
                proc_num::STORAGE_VOL_DOWNLOAD,
                Reply::download(data.clone()),
            )
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    let n = within(c.storage_vol_download(&vol(), 0, 0, StorageVolStreamFlags::empty(), &mut got))
        .await
        .unwrap();
    assert_eq!(n, data.len() as u64);
    assert_eq!(got, data);
}

#[tokio::test]
async fn an_upload_is_recorded_with_its_bytes_and_finish() {
    let data: Vec<u8> = (0..600_000u32).map(|i| (i % 13) as u8).collect();
    let (c, daemon) = within(
        Script::new()
            .reply(proc_num::STORAGE_VOL_UPLOAD, Reply::upload())
            .connect(Config::default()),
    )
    .await
    .unwrap();
    within(c.storage_vol_upload(
        &vol(),
        0,
        data.len() as u64,
        StorageVolStreamFlags::empty(),
        &data[..],
    ))
    .await
    .unwrap();
    let uploads = daemon.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].outcome, UploadOutcome::Finished);
    assert_eq!(uploads[0].data, data);
    let (v, offset, length, flags) = uploads[0]
        .call
        .args::<(StorageVol, u64, u64, u32)>()
        .unwrap();
    assert_eq!((v, offset, length, flags), (vol(), 0, data.len() as u64, 0));
}

#[tokio::test]
async fn an_upload_the_daemon_fails_returns_its_error() {
    let (c, daemon) = within(
        Script::new()
            .reply(
                proc_num::STORAGE_VOL_UPLOAD,
                Reply::upload_failing_after(
                    1,
                    ErrorCode::SystemError,
                    ErrorDomain::Storage,
                    "cannot write to stream: No space left on device",
                ),
            )
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let source = vec![1u8; 4 << 20];
    let e = within(c.storage_vol_upload(
        &vol(),
        0,
        source.len() as u64,
        StorageVolStreamFlags::empty(),
        &source[..],
    ))
    .await
    .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::SystemError), "{e:?}");
    assert!(e.to_string().contains("No space left"), "{e}");
    assert_eq!(daemon.uploads()[0].outcome, UploadOutcome::Failed);
    // The link survives the failed stream.
    assert!(!c.is_closed());
}

#[tokio::test]
async fn events_reach_subscribers_until_they_unsubscribe() {
    let (c, daemon) = within(Script::new().connect(Config::default()))
        .await
        .unwrap();
    assert_eq!(
        within(daemon.emit_lifecycle(&lifecycle("early")))
            .await
            .unwrap(),
        0,
        "nobody subscribed yet"
    );
    let mut sub = within(c.subscribe_lifecycle(None)).await.unwrap();
    assert_eq!(
        within(daemon.emit_lifecycle(&lifecycle("web")))
            .await
            .unwrap(),
        1
    );
    assert_eq!(within(sub.recv()).await.unwrap(), lifecycle("web"));
    within(sub.unsubscribe()).await.unwrap();
    assert_eq!(
        within(daemon.emit_lifecycle(&lifecycle("late")))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        daemon.procedures()[3..],
        [
            proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_REGISTER_ANY,
            proc_num::CONNECT_DOMAIN_EVENT_CALLBACK_DEREGISTER_ANY
        ]
    );
}

#[tokio::test]
async fn disconnect_fails_pending_calls_with_eof_and_keeps_the_record() {
    let (c, mut daemon) = within(
        Script::new()
            .reply(proc_num::CONNECT_GET_LIB_VERSION, Reply::Silence)
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let pending = {
        let c = c.clone();
        tokio::spawn(async move { c.connect_get_lib_version().await })
    };
    // Disconnect once the call reached the daemon.
    within(async {
        while !daemon
            .procedures()
            .contains(&proc_num::CONNECT_GET_LIB_VERSION)
        {
            tokio::task::yield_now().await;
        }
    })
    .await;
    daemon.disconnect().await;
    assert!(!daemon.is_running());
    let r = within(pending).await.unwrap();
    assert!(
        matches!(r, Err(Error::Disconnected(DisconnectReason::Eof))),
        "{r:?}"
    );
    assert!(matches!(within(c.closed()).await, DisconnectReason::Eof));
    assert_eq!(daemon.procedures().len(), 4);
    assert!(daemon.send_bytes(b"x").await.unwrap_err().is_disconnected());
}

#[tokio::test]
async fn reply_disconnect_drops_the_link_at_that_call() {
    let (c, daemon) = within(
        Script::new()
            .reply(proc_num::CONNECT_GET_HOSTNAME, Reply::Disconnect)
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let e = within(c.connect_get_hostname()).await.unwrap_err();
    assert!(e.is_disconnected(), "{e:?}");
    within(async {
        while daemon.is_running() {
            tokio::task::yield_now().await;
        }
    })
    .await;
}

#[tokio::test]
async fn silence_runs_the_call_into_its_deadline() {
    let (c, _daemon) = within(
        Script::new()
            .reply(proc_num::CONNECT_GET_HOSTNAME, Reply::Silence)
            .connect(Config::default()),
    )
    .await
    .unwrap();
    let e = within(
        c.with_call_timeout(Duration::from_millis(50))
            .connect_get_hostname(),
    )
    .await
    .unwrap_err();
    assert!(e.is_timeout(), "{e:?}");
}

/// A daemon that stops answering PINGs is declared dead by the client's
/// keepalive; one that answers keeps the link (the same run, for contrast).
#[tokio::test]
async fn unanswered_pings_end_the_link_by_keepalive() {
    let config = Config::default().keepalive(Duration::from_millis(20), 2);
    let (silent, _d1) = within(Script::new().answer_pings(false).connect(config.clone()))
        .await
        .unwrap();
    let (answering, _d2) = within(Script::new().connect(config)).await.unwrap();
    let reason = within(silent.closed()).await;
    assert!(
        matches!(reason, DisconnectReason::KeepaliveTimeout { .. }),
        "{reason:?}"
    );
    assert!(!answering.is_closed());
}

#[tokio::test]
async fn dropping_the_daemon_closes_the_link() {
    let (c, daemon) = within(Script::new().connect(Config::default()))
        .await
        .unwrap();
    drop(daemon);
    assert!(matches!(within(c.closed()).await, DisconnectReason::Eof));
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The download → upload pipeline through the real stack: a local HTTP
//! server, `ImageSource`, a dedicated connection over the sandbox's sshd,
//! libvirt-rpc's volume upload into the sandbox's pool. Plus the per-call
//! log lines, and that user data in a seed never reaches any log.

use std::time::Duration;

use crate::http_server::{Reply, Server, digest, image};
use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::seed_iso::{DEFAULT_SIZE_LIMIT, SeedSpec, build};
use kvm2_provider::__internals::hosts::HostTable;
use kvm2_provider::__internals::images::ImageSource;
use kvm2_provider::__internals::libvirt::observed;
use kvm2_provider::{Error, HostOptions, SourceLimits};
use libvirt_rpc::StorageVolStreamFlags;
use provider_api::{Identifier, SecretString};
use testkit::Descriptor;

use crate::sandbox_hosts::temp_volume;

fn table(sandbox: &Descriptor) -> HostTable {
    let options = HostOptions {
        remote_socket: sandbox.remote_socket.display().to_string(),
        ..HostOptions::default()
    };
    HostTable::new(&crate::sandbox_hosts::sandbox_config(sandbox), &options).unwrap()
}

#[tokio::test]
async fn download_streams_into_a_pool_volume_and_a_bad_digest_aborts_it() {
    let sandbox = Descriptor::require();
    let body = image(3 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let source = ImageSource::new(SourceLimits {
        deadline: Duration::from_secs(60),
        ..SourceLimits::default()
    })
    .unwrap();
    let table = table(&sandbox);
    let host = Identifier::parse("host1").unwrap();
    let conn = table.dedicated(&host).await.unwrap();

    // Verified download, no Content-Length, length unknown to libvirt.
    let target = temp_volume(&conn, &sandbox, "ok").await;
    let download = source
        .open(&server.url("/img"), digest(&body))
        .await
        .unwrap();
    let mut reader = download.into_async_read();
    let sent = conn
        .client()
        .storage_vol_upload(
            &target.vol,
            0,
            0,
            StorageVolStreamFlags::empty(),
            &mut reader,
        )
        .await
        .unwrap();
    assert_eq!(sent, body.len() as u64);
    assert_eq!(
        reader.into_inner().into_inner().verified(),
        Some(digest(&body))
    );
    assert_eq!(std::fs::read(&target.vol.key).unwrap(), *body);

    // Wrong digest: the last read fails, so the upload is aborted, not
    // finished, and the error says why.
    let target = temp_volume(&conn, &sandbox, "bad").await;
    let download = source
        .open(&server.url("/img"), digest(b"other"))
        .await
        .unwrap();
    let err = conn
        .client()
        .storage_vol_upload(
            &target.vol,
            0,
            0,
            StorageVolStreamFlags::empty(),
            download.into_async_read(),
        )
        .await
        .unwrap_err();
    let io = match &err {
        libvirt_rpc::Error::Source(io) => io,
        other => panic!("expected an aborted upload, got {other:?}"),
    };
    assert!(
        matches!(
            io.get_ref().and_then(|e| e.downcast_ref::<Error>()),
            Some(Error::DigestMismatch { .. })
        ),
        "{io:?}"
    );
    // The connection survives an aborted stream.
    conn.client().connect_get_lib_version().await.unwrap();
    conn.close().await;
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn one_log_line_per_call_and_no_user_data_in_any_log() {
    let sandbox = Descriptor::require();
    let (logs, _guard) = testkit::captured::capture(tracing::Level::TRACE);
    let table = table(&sandbox);
    let host = Identifier::parse("host1").unwrap();
    let conn = table.dedicated(&host).await.unwrap();
    let client = conn.client();

    observed(
        &host,
        libvirt_rpc::proc_num::CONNECT_GET_LIB_VERSION,
        client.connect_get_lib_version(),
    )
    .await
    .unwrap();
    let err = observed(
        &host,
        libvirt_rpc::proc_num::DOMAIN_LOOKUP_BY_NAME,
        client.domain_lookup_by_name("kvm2-it-no-such-domain"),
    )
    .await
    .unwrap_err();
    assert!(err.is_not_found());

    // A seed carrying a secret goes over the wire through the same path.
    let secret = "SECRET-user-data-7f3a9c";
    let name = Identifier::parse("ep-logtest").unwrap();
    let user_data = SecretString::new(format!("#cloud-config\n# {secret}\n"));
    let seed = build(&SeedSpec {
        instance_id: &name,
        hostname: &name,
        user_data: Some(&user_data),
        vendor_data: "#cloud-config\n",
        time: Timestamp::from_unix_seconds(0).unwrap(),
        size_limit: DEFAULT_SIZE_LIMIT,
    })
    .unwrap();
    tracing::debug!(spec = ?user_data, "seed built");
    let target = temp_volume(&conn, &sandbox, "seed").await;
    observed(
        &host,
        libvirt_rpc::proc_num::STORAGE_VOL_UPLOAD,
        client.storage_vol_upload(
            &target.vol,
            0,
            seed.len() as u64,
            StorageVolStreamFlags::empty(),
            &seed[..],
        ),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read(&target.vol.key).unwrap(), seed);
    drop(target);
    conn.close().await;

    let text = logs.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("libvirt call"))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("procedure=\"connect_get_lib_version\"")
            && lines[0].contains("host=host1")
            && lines[0].contains("outcome=\"ok\"")
            && lines[0].contains("elapsed_ms="),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("procedure=\"domain_lookup_by_name\"")
            && lines[1].contains("outcome=\"error\"")
            && lines[1].contains("class=not_found"),
        "{}",
        lines[1]
    );
    assert!(!text.contains(secret), "user data reached the logs");
    assert!(
        text.contains("[redacted]"),
        "the redacted form was not logged"
    );
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Image downloads against a tiny HTTP/1.1 server on 127.0.0.1 that the test
//! starts and owns: digests, truncation, missing Content-Length, the size
//! cap, redirects, the deadline, and how many requests were made.

use std::time::Duration;

use crate::http_server::{Reply, Server, digest, image};
use futures::StreamExt;
use kvm2_provider::__internals::images::{Download, ImageSource};
use kvm2_provider::{Error, SourceLimits};
use provider_api::ErrorClass;
use tokio::io::AsyncReadExt;

fn limits() -> SourceLimits {
    SourceLimits {
        max_bytes: 4 << 20,
        max_redirects: 3,
        deadline: Duration::from_secs(20),
        connect_timeout: Duration::from_secs(5),
        stall_timeout: Duration::from_secs(20),
    }
}

/// Drains a download: the bytes before the end, and how it ended.
async fn drain(mut download: Download) -> (Vec<u8>, Option<Error>, Download) {
    let mut got = Vec::new();
    let mut failure = None;
    let outcome = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(item) = download.next().await {
            match item {
                Ok(chunk) => got.extend_from_slice(&chunk),
                Err(e) => {
                    failure = Some(e);
                    // The stream ends after its error.
                    assert!(download.next().await.is_none());
                    break;
                }
            }
        }
    })
    .await;
    outcome.expect("download did not end within 30 s");
    (got, failure, download)
}

#[tokio::test]
async fn correct_digest_with_content_length() {
    let body = image(1 << 20);
    let server = crate::http_server::serve_body(&body).await;
    let source = ImageSource::new(limits()).unwrap();
    let download = source
        .open(&server.url("/img.qcow2"), digest(&body))
        .await
        .unwrap();
    assert_eq!(download.declared_len(), Some(body.len() as u64));
    let (got, failure, download) = drain(download).await;
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(&got, &*body);
    assert_eq!(download.verified(), Some(digest(&body)));
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn no_content_length_close_delimited_and_chunked() {
    let body = image(300_000);
    let (b1, b2) = (body.clone(), body.clone());
    let server = Server::start(move |path| match path {
        "/close" => Reply::Body {
            body: b1.clone(),
            length: false,
        },
        _ => Reply::Chunked(b2.clone()),
    })
    .await;
    let source = ImageSource::new(limits()).unwrap();
    for path in ["/close", "/chunked"] {
        let download = source.open(&server.url(path), digest(&body)).await.unwrap();
        assert_eq!(download.declared_len(), None, "{path}");
        let (got, failure, download) = drain(download).await;
        assert!(failure.is_none(), "{path}: {failure:?}");
        assert_eq!(got.len(), body.len(), "{path}");
        assert!(download.verified().is_some(), "{path}");
    }
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn wrong_digest_is_the_last_item_and_permanent() {
    let body = image(200_000);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let source = ImageSource::new(limits()).unwrap();
    let wrong = digest(b"something else");
    let download = source.open(&server.url("/img"), wrong).await.unwrap();
    let (got, failure, download) = drain(download).await;
    // Every byte passed, and the verdict came before the end.
    assert_eq!(got.len(), body.len());
    match failure {
        Some(e @ Error::DigestMismatch { .. }) => {
            assert_eq!(e.class(), ErrorClass::Permanent);
            assert!(e.to_string().contains(&digest(&body).to_string()), "{e}");
        }
        other => panic!("expected DigestMismatch, got {other:?}"),
    }
    assert_eq!(download.verified(), None);
}

#[tokio::test]
async fn body_cut_short_is_an_error_not_an_end() {
    let body = image(500_000);
    let (b1, b2) = (body.clone(), body.clone());
    let server = Server::start(move |path| match path {
        "/declared" => Reply::Truncated {
            body: b1.clone(),
            send: 200_000,
        },
        _ => Reply::ChunkedDies {
            body: b2.clone(),
            send: 200_000,
        },
    })
    .await;
    let source = ImageSource::new(limits()).unwrap();
    for path in ["/declared", "/chunked"] {
        let download = source.open(&server.url(path), digest(&body)).await.unwrap();
        let (got, failure, download) = drain(download).await;
        assert!(got.len() <= 200_000, "{path}");
        match failure {
            Some(e @ Error::Source(_)) => assert_eq!(e.class(), ErrorClass::Transient),
            other => panic!("{path}: expected a source error, got {other:?}"),
        }
        assert_eq!(download.verified(), None);
    }
}

#[tokio::test]
async fn too_large_declared_fails_before_the_body() {
    let body = image(2 << 20);
    let server = crate::http_server::serve_body(&body).await;
    let source = ImageSource::new(SourceLimits {
        max_bytes: 1 << 20,
        ..limits()
    })
    .unwrap();
    let err = source
        .open(&server.url("/big"), digest(&body))
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::ImageTooLarge { limit } if limit == 1 << 20),
        "{err:?}"
    );
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn too_large_undeclared_stops_at_the_cap() {
    let body = image(2 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let cap = 1 << 20;
    let source = ImageSource::new(SourceLimits {
        max_bytes: cap,
        ..limits()
    })
    .unwrap();
    let download = source
        .open(&server.url("/big"), digest(&body))
        .await
        .unwrap();
    let (got, failure, _) = drain(download).await;
    assert!(
        got.len() as u64 <= cap,
        "{} bytes passed the cap",
        got.len()
    );
    assert!(
        matches!(failure, Some(Error::ImageTooLarge { .. })),
        "{failure:?}"
    );
}

#[tokio::test]
async fn redirects_are_followed_up_to_the_limit() {
    let body = image(10_000);
    let b = body.clone();
    let server = Server::start(move |path| match path {
        "/loop-a" => Reply::Redirect("/loop-b".into()),
        "/loop-b" => Reply::Redirect("/loop-a".into()),
        "/hop" => Reply::Redirect("/img".into()),
        "/to-file" => Reply::Redirect("file:///etc/passwd".into()),
        _ => Reply::Body {
            body: b.clone(),
            length: true,
        },
    })
    .await;
    let source = ImageSource::new(limits()).unwrap();

    let download = source
        .open(&server.url("/hop"), digest(&body))
        .await
        .unwrap();
    let (got, failure, _) = drain(download).await;
    assert!(failure.is_none());
    assert_eq!(got.len(), body.len());
    assert_eq!(server.hits(), 2);

    let err = source
        .open(&server.url("/loop-a"), digest(&body))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::Source(e) if e.is_redirect()),
        "{err:?}"
    );
    assert_eq!(err.class(), ErrorClass::Permanent);
    // The original request plus max_redirects followed ones, then refused.
    assert_eq!(server.hits(), 2 + 1 + limits().max_redirects);

    // A redirect to another scheme is not followed: the 3xx is the answer,
    // and a permanent error.
    let before = server.hits();
    let err = source
        .open(&server.url("/to-file"), digest(&body))
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::HttpStatus { status: 302 }), "{err:?}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    assert_eq!(server.hits(), before + 1);
}

#[tokio::test]
async fn error_statuses_are_classified() {
    let server = Server::start(|path| match path {
        "/missing" => Reply::Status(404),
        _ => Reply::Status(503),
    })
    .await;
    let source = ImageSource::new(limits()).unwrap();
    let err = source
        .open(&server.url("/missing"), digest(b""))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::HttpStatus { status: 404 }), "{err:?}");
    assert_eq!(err.class(), ErrorClass::Permanent);
    let err = source
        .open(&server.url("/busy"), digest(b""))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::HttpStatus { status: 503 }), "{err:?}");
    assert_eq!(err.class(), ErrorClass::Transient);
}

#[tokio::test]
async fn a_stalled_source_ends_at_its_deadline() {
    let body = image(100_000);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Stalls {
        body: b.clone(),
        send: 50_000,
    })
    .await;
    let deadline = Duration::from_millis(800);
    let source = ImageSource::new(SourceLimits {
        deadline,
        ..limits()
    })
    .unwrap();
    let download = source
        .open(&server.url("/slow"), digest(&body))
        .await
        .unwrap();
    let (got, failure, _) = drain(download).await;
    assert!(got.len() <= 50_000);
    match failure {
        Some(e @ Error::SourceDeadline(d)) => {
            assert_eq!(d, deadline);
            assert_eq!(e.class(), ErrorClass::Transient);
        }
        other => panic!("expected SourceDeadline, got {other:?}"),
    }
}

#[tokio::test]
async fn async_read_adapter_carries_the_verdict() {
    let body = image(100_000);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let source = ImageSource::new(limits()).unwrap();

    let download = source
        .open(&server.url("/ok"), digest(&body))
        .await
        .unwrap();
    let mut reader = download.into_async_read();
    let mut got = Vec::new();
    reader.read_to_end(&mut got).await.unwrap();
    assert_eq!(&got, &*body);
    assert_eq!(
        reader.into_inner().into_inner().verified(),
        Some(digest(&body))
    );

    let download = source
        .open(&server.url("/bad"), digest(b"x"))
        .await
        .unwrap();
    let mut reader = download.into_async_read();
    let err = reader.read_to_end(&mut Vec::new()).await.unwrap_err();
    let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
    assert!(
        matches!(inner, Some(Error::DigestMismatch { .. })),
        "{err:?}"
    );
}

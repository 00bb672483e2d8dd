#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Cloud-init user data never reaches a log line, span or error of Create
//! and Delete (every crate captured at TRACE). Its own test binary: the
//! capturing subscriber is a thread-local default, and tracing caches
//! callsite interest process-wide, so tests in the same process without a
//! subscriber could hide log lines from it. It shares `tests/it`'s image
//! server and provider environment by path; it uses only part of them.

#[allow(dead_code)]
#[path = "it/http_server.rs"]
mod http_server;
#[allow(dead_code)]
#[path = "it/provider_env.rs"]
mod provider_env;

use http_server::{Reply, Server};
use provider_api::{ErrorClass, Placement, Provider, SecretString};
use provider_env::{Env, served_image};

// Current-thread runtime: the capturing subscriber is this thread's default.
#[tokio::test(flavor = "current_thread")]
async fn user_data_never_reaches_logs_or_errors_of_create_and_delete() {
    let (captured, _guard) = testkit::captured::capture(tracing::Level::TRACE);

    let env = Env::new();
    let body = http_server::image(1 << 20);
    let b = body.clone();
    let server = Server::start(move |_| Reply::Chunked(b.clone())).await;
    let image = served_image(&server, "tiny", &body, "raw");
    let provider = env.one_host_provider(image);
    let secret = format!("SECRET-{}", testkit::names::random_hex());
    let mut req = env.request(env.owner(), Placement::Any);
    req.user_data = Some(SecretString::new(format!("#cloud-config\n# {secret}\n")));

    tracing::info!(request = ?req, "create requested");
    let inst = provider.create(&req).await.unwrap();
    provider.delete(&inst.id).await.unwrap();
    // A failing create (a seed over its limit) carries no user data either.
    let mut big = env.request(env.owner(), Placement::Any);
    big.user_data = Some(SecretString::new(format!(
        "#cloud-config\n# {secret}\n{}",
        "x".repeat(2 << 20)
    )));
    let err = provider.create(&big).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Permanent, "{err:?}");
    let err_text = format!("{err} {err:?}");
    assert!(!err_text.contains(&secret), "user data in an error");

    let logs = captured.text();
    assert!(!logs.contains(&secret), "user data reached the logs");
    // The calls were logged: one line per libvirt call, with the procedure.
    for procedure in [
        "domain_define_xml_flags",
        "storage_vol_upload",
        "storage_vol_create_xml",
        "node_get_memory_stats",
        "domain_undefine_flags",
    ] {
        assert!(
            logs.contains(&format!("procedure=\"{procedure}\"")),
            "no log line for {procedure}"
        );
    }
}

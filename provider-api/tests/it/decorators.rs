//! The metrics and tracing decorators: errors pass through unchanged, every
//! operation is counted and spanned, and the `Checker` capability stays
//! visible through every wrapping (the seeds' wrappers hid it).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::fake::{Fake, Script, id, pid};
use provider_api::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

fn metrics() -> (prometheus_client::registry::Registry, ProviderMetrics) {
    let mut reg = prometheus_client::registry::Registry::default();
    let m = ProviderMetrics::new(&mut reg);
    (reg, m)
}

fn exposition(reg: &prometheus_client::registry::Registry) -> String {
    let mut s = String::new();
    prometheus_client::encoding::text::encode(&mut s, reg).unwrap();
    s
}

fn request() -> CreateRequest {
    let mut r = CreateRequest::new(
        OwnerUid::parse("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab").unwrap(),
        ObjectName::parse("proxy-a").unwrap(),
        id("team-a"),
    );
    r.user_data = Some(SecretString::new("#cloud-config\npassword: hunter2-SECRET"));
    r
}

/// Every way the operator may wrap a provider.
fn wrappings(inner: Arc<Fake>, m: &ProviderMetrics) -> Vec<(&'static str, Arc<dyn Provider>)> {
    let p: Arc<dyn Provider> = inner;
    let metered: Arc<dyn Provider> = Arc::new(Metered::new(p.clone(), m.clone()));
    let traced: Arc<dyn Provider> = Arc::new(Traced::new(p.clone()));
    let traced_metered: Arc<dyn Provider> = Arc::new(Traced::new(metered.clone()));
    let metered_traced: Arc<dyn Provider> = Arc::new(Metered::new(traced.clone(), m.clone()));
    let double: Arc<dyn Provider> = Arc::new(Traced::new(traced_metered.clone()));
    vec![
        ("bare", p),
        ("metered", metered),
        ("traced", traced),
        ("traced(metered)", traced_metered),
        ("metered(traced)", metered_traced),
        ("traced(traced(metered))", double),
    ]
}

#[tokio::test]
async fn checker_capability_survives_every_wrapping() {
    let (_reg, m) = metrics();
    let fake = Arc::new(Fake::new("fake", true));
    for (what, p) in wrappings(fake.clone(), &m) {
        let checker = p
            .checker()
            .unwrap_or_else(|| panic!("{what} hid the checker"));
        let statuses = checker.check(Duration::from_secs(1)).await;
        assert_eq!(statuses.len(), 2, "{what}");
        assert_eq!(statuses[0].target, id("h1"));
        assert!(statuses[0].reachable);
        assert_eq!(statuses[1].reason, CheckReason::Timeout);
    }
    assert_eq!(
        fake.checker.as_ref().unwrap().calls.load(Ordering::SeqCst),
        6
    );
}

#[tokio::test]
async fn instance_events_survive_every_wrapping() {
    let (_reg, m) = metrics();
    for (what, p) in wrappings(Arc::new(Fake::new("fake", true)), &m) {
        let mut events = p
            .instance_events()
            .unwrap_or_else(|| panic!("{what} hid the instance events"));
        assert_eq!(
            events.next().await,
            Some(provider_api::InstanceEvent::Resync { host: id("h1") }),
            "{what}"
        );
        assert_eq!(events.next().await, None, "{what}");
    }
    for (what, p) in wrappings(Arc::new(Fake::new("fake", false)), &m) {
        assert!(p.instance_events().is_none(), "{what} made events up");
    }
}

#[test]
fn fills_in_flight_survive_every_wrapping() {
    let (_reg, m) = metrics();
    for (what, p) in wrappings(Arc::new(Fake::new("fake", true)), &m) {
        assert_eq!(p.fills_in_flight(), Some(3), "{what}");
    }
    for (what, p) in wrappings(Arc::new(Fake::new("fake", false)), &m) {
        assert_eq!(p.fills_in_flight(), None, "{what}");
    }
}

#[tokio::test]
async fn checker_capability_survives_registry_instrumentation() {
    let (_reg, m) = metrics();
    let mut registry = Registry::new();
    registry
        .register(
            ProviderType::Kvm2,
            |e: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
                Ok(Arc::new(Fake::new(e.name.as_str(), true)))
            },
        )
        .unwrap();
    let cfg = ProvidersConfig::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/providers-config.yaml"),
    )
    .unwrap();
    let providers = registry.build(&cfg).unwrap().instrumented(&m);
    for p in providers.iter() {
        assert!(p.checker().is_some(), "{} lost its checker", p.name());
    }
}

#[tokio::test]
async fn no_checker_stays_no_checker() {
    let (_reg, m) = metrics();
    for (what, p) in wrappings(Arc::new(Fake::new("fake", false)), &m) {
        assert!(p.checker().is_none(), "{what} invented a checker");
    }
}

#[tokio::test]
async fn errors_pass_through_unchanged() {
    let (_reg, m) = metrics();
    for class in ErrorClass::ALL {
        let fake = Arc::new(Fake::new("fake", true));
        fake.set(Script::Fail(class));
        for (what, p) in wrappings(fake.clone(), &m) {
            let errs = [
                p.create(&request()).await.unwrap_err(),
                p.get(&pid()).await.unwrap_err(),
                p.delete(&pid()).await.unwrap_err(),
                p.list_by_tag(&Tag::managed()).await.unwrap_err(),
            ];
            for e in errs {
                assert_eq!(e.class(), class, "{what}");
                assert_eq!(e.to_string(), format!("scripted {class}"), "{what}");
                let src = e.source().map(|s| s.to_string());
                assert_eq!(src.as_deref(), Some("root cause"), "{what}");
            }
        }
    }
}

#[tokio::test]
async fn successes_pass_through_unchanged() {
    let (_reg, m) = metrics();
    let fake = Arc::new(Fake::new("fake", false));
    for (what, p) in wrappings(fake.clone(), &m) {
        assert_eq!(
            p.create(&request()).await.unwrap(),
            fake.instance(),
            "{what}"
        );
        assert_eq!(p.get(&pid()).await.unwrap(), fake.instance(), "{what}");
        p.delete(&pid()).await.unwrap();
        assert!(p.list_by_tag(&Tag::managed()).await.unwrap().is_empty());
        assert_eq!(p.name(), &id("fake"));
        assert_eq!(p.provider_type(), ProviderType::Kvm2);
    }
}

#[tokio::test]
async fn metrics_count_by_provider_operation_and_outcome() {
    let (reg, m) = metrics();
    let fake = Arc::new(Fake::new("fake", true));
    let p = Metered::new(fake.clone(), m.clone());
    p.create(&request()).await.unwrap();
    p.get(&pid()).await.unwrap();
    fake.set(Script::Fail(ErrorClass::QuotaExceeded));
    let _ = p.create(&request()).await;
    let _ = p.create(&request()).await;
    fake.set(Script::Fail(ErrorClass::NotFound));
    let _ = p.get(&pid()).await;
    fake.set(Script::Fail(ErrorClass::Transient));
    let _ = p.list_by_tag(&Tag::managed()).await;
    fake.set(Script::Fail(ErrorClass::Permanent));
    let _ = p.delete(&pid()).await;
    let _ = p.checker().unwrap().check(Duration::from_secs(1)).await;

    let text = exposition(&reg);
    for line in [
        r#"provider_operations_total{provider="fake",operation="create",outcome="ok"} 1"#,
        r#"provider_operations_total{provider="fake",operation="create",outcome="quota_exceeded"} 2"#,
        r#"provider_operations_total{provider="fake",operation="get",outcome="ok"} 1"#,
        r#"provider_operations_total{provider="fake",operation="get",outcome="not_found"} 1"#,
        r#"provider_operations_total{provider="fake",operation="list_by_tag",outcome="transient"} 1"#,
        r#"provider_operations_total{provider="fake",operation="delete",outcome="permanent"} 1"#,
        r#"provider_operations_total{provider="fake",operation="check",outcome="ok"} 1"#,
        r#"provider_operation_duration_seconds_count{provider="fake",operation="create",outcome="quota_exceeded"} 2"#,
        r#"provider_check_targets_total{provider="fake",reason="Reachable"} 1"#,
        r#"provider_check_targets_total{provider="fake",reason="Timeout"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line}\n{text}");
    }
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test]
async fn dropped_operation_counts_as_cancelled() {
    let (reg, m) = metrics();
    let fake = Arc::new(Fake::new("fake", false));
    fake.set(Script::Hang);
    let p = Metered::new(fake.clone(), m);
    let r = tokio::time::timeout(Duration::from_millis(20), p.get(&pid())).await;
    assert!(r.is_err(), "the scripted call hangs");
    let text = exposition(&reg);
    let line =
        r#"provider_operations_total{provider="fake",operation="get",outcome="cancelled"} 1"#;
    assert!(text.lines().any(|l| l == line), "{text}");
}

// ---- tracing ----

/// Spans seen: name and every field recorded on them.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<SpanRecord>>>);

/// A span's name and its fields.
type SpanRecord = (String, BTreeMap<String, String>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S> Layer<S> for Captured
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        fields.insert("#id".into(), format!("{}", id.into_u64()));
        self.0
            .lock()
            .unwrap()
            .push((attrs.metadata().name().to_owned(), fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let key = format!("{}", id.into_u64());
        let mut spans = self.0.lock().unwrap();
        if let Some((_, f)) = spans
            .iter_mut()
            .rev()
            .find(|(_, f)| f.get("#id") == Some(&key))
        {
            values.record(&mut Fields(f));
        }
    }
}

#[tokio::test]
async fn traced_opens_one_span_per_operation_and_records_error_class() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(captured.clone());
    let _guard = tracing::subscriber::set_default(subscriber);

    let fake = Arc::new(Fake::new("fake", true));
    let p = Traced::new(fake.clone());
    p.create(&request()).await.unwrap();
    p.get(&pid()).await.unwrap();
    fake.set(Script::Fail(ErrorClass::NotFound));
    let _ = p.delete(&pid()).await;
    let _ = p.list_by_tag(&Tag::managed()).await;
    let _ = p
        .checker()
        .unwrap()
        .check(Duration::from_millis(1500))
        .await;

    let spans = captured.0.lock().unwrap().clone();
    let names: Vec<_> = spans.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "provider.create",
            "provider.get",
            "provider.delete",
            "provider.list_by_tag",
            "provider.check"
        ]
    );
    let f = |i: usize, k: &str| spans[i].1.get(k).cloned().unwrap_or_default();
    assert_eq!(f(0, "provider"), "fake");
    assert_eq!(f(0, "owner_uid"), "6f1c2a3e-1b2c-4d5e-8f90-0123456789ab");
    assert_eq!(f(0, "instance"), "ep-e7749fc11676e12e");
    assert_eq!(f(0, "provider_id"), "kvm2://fake/h1/ep-1");
    assert_eq!(f(0, "error.class"), "");
    assert_eq!(f(1, "state"), "running");
    assert_eq!(f(2, "error.class"), "not_found");
    assert_eq!(f(2, "error.message"), "scripted not_found");
    assert_eq!(f(3, "tag"), "managed-by=egress-proxies");
    assert_eq!(f(3, "error.class"), "not_found");
    assert_eq!(f(4, "timeout_ms"), "1500");
    assert_eq!(f(4, "targets"), "2");
    assert_eq!(f(4, "reachable"), "1");

    let all = format!("{spans:?}");
    assert!(
        !all.contains("hunter2"),
        "user data leaked into a span: {all}"
    );
    assert!(f(0, "user_data_bytes").parse::<usize>().unwrap() > 0);
}

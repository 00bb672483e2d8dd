//! OTLP's protobuf encoding of finished spans: an
//! `opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest`
//! written by hand (sans-IO, no protobuf runtime): the request is a handful
//! of messages, and their field numbers are part of OTLP's stable 1.x
//! wire format. The tests decode what this writes with `protoc` and the
//! official `.proto` files.

use std::time::{SystemTime, UNIX_EPOCH};

/// A span attribute's value (OTLP's `AnyValue`, the kinds tracing records).
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `string_value`.
    Str(String),
    /// `bool_value`.
    Bool(bool),
    /// `int_value`.
    Int(i64),
    /// `double_value`.
    Double(f64),
}

/// OTLP's `Span.SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `SPAN_KIND_INTERNAL`.
    Internal = 1,
    /// `SPAN_KIND_CLIENT`: a call to another process (libvirt, SSH, the
    /// API server).
    Client = 3,
}

/// A finished span.
#[derive(Debug, Clone, PartialEq)]
pub struct SpanRecord {
    /// 16 bytes, shared by every span of the trace.
    pub trace_id: [u8; 16],
    /// 8 bytes, unique.
    pub span_id: [u8; 8],
    /// The parent's span id; `None` for a trace's root.
    pub parent_span_id: Option<[u8; 8]>,
    /// The span's name.
    pub name: String,
    /// Its kind.
    pub kind: Kind,
    /// When it was created.
    pub start: SystemTime,
    /// When it closed.
    pub end: SystemTime,
    /// Its fields, in recording order.
    pub attributes: Vec<(String, Value)>,
    /// `Some(message)` when the span recorded an error.
    pub error: Option<String>,
}

/// Encodes one export request: `spans` under one resource (`resource`'s
/// attributes, e.g. `service.name`) and one instrumentation scope.
pub fn export_request(resource: &[(String, Value)], scope: &str, spans: &[SpanRecord]) -> Vec<u8> {
    let mut resource_msg = Vec::new();
    for (k, v) in resource {
        message(&mut resource_msg, 1, &key_value(k, v));
    }
    let mut scope_msg = Vec::new();
    string(&mut scope_msg, 1, scope);
    let mut scope_spans = Vec::new();
    message(&mut scope_spans, 1, &scope_msg);
    for span in spans {
        message(&mut scope_spans, 2, &span_message(span));
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource_msg);
    message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    message(&mut request, 1, &resource_spans);
    request
}

fn span_message(s: &SpanRecord) -> Vec<u8> {
    let mut m = Vec::with_capacity(128 + 32 * s.attributes.len());
    bytes(&mut m, 1, &s.trace_id);
    bytes(&mut m, 2, &s.span_id);
    if let Some(parent) = &s.parent_span_id {
        bytes(&mut m, 4, parent);
    }
    string(&mut m, 5, &s.name);
    varint_field(&mut m, 6, s.kind as u64);
    fixed64(&mut m, 7, unix_nanos(s.start));
    fixed64(&mut m, 8, unix_nanos(s.end));
    for (k, v) in &s.attributes {
        message(&mut m, 9, &key_value(k, v));
    }
    if let Some(text) = &s.error {
        let mut status = Vec::new();
        string(&mut status, 2, text);
        varint_field(&mut status, 3, 2); // STATUS_CODE_ERROR
        message(&mut m, 15, &status);
    }
    m
}

fn key_value(key: &str, value: &Value) -> Vec<u8> {
    let mut any = Vec::new();
    match value {
        Value::Str(s) => string(&mut any, 1, s),
        Value::Bool(b) => varint_field(&mut any, 2, u64::from(*b)),
        // Two's complement, as protobuf's int64 is on the wire.
        Value::Int(i) => varint_field(&mut any, 3, *i as u64),
        Value::Double(d) => fixed64(&mut any, 4, d.to_bits()),
    }
    let mut kv = Vec::new();
    string(&mut kv, 1, key);
    message(&mut kv, 2, &any);
    kv
}

/// Nanoseconds since the Unix epoch (0 before it; saturating far after).
fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire_type));
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, m: &[u8]) {
    bytes(out, field, m);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_tags_are_protobufs() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let mut v = Vec::new();
        varint(&mut v, u64::MAX);
        assert_eq!(v.len(), 10);
        let mut v = Vec::new();
        fixed64(&mut v, 7, 1);
        assert_eq!(v, [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        let mut v = Vec::new();
        string(&mut v, 5, "ab");
        assert_eq!(v, [0x2a, 2, b'a', b'b']);
    }
}

/// What the official definitions make of the encoding: `protoc --decode`
/// with OpenTelemetry's `.proto` files (Debian's `opentelemetry-proto`,
/// installed by `cargo xtask setup`).
#[cfg(test)]
mod decoded_by_protoc {
    use super::*;
    use std::time::Duration;
    use testkit::otlp::protoc_text;

    #[test]
    fn protoc_reads_every_field_as_written() {
        let t0 = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let span = SpanRecord {
            trace_id: [0xab; 16],
            span_id: [1, 2, 3, 4, 5, 6, 7, 8],
            parent_span_id: Some([9; 8]),
            name: "provider.create".into(),
            kind: Kind::Client,
            start: t0,
            end: t0 + Duration::from_millis(5),
            attributes: vec![
                ("provider".into(), Value::Str("lab \"1\"".into())),
                ("user_data_bytes".into(), Value::Int(-42)),
                ("ok".into(), Value::Bool(true)),
                ("ratio".into(), Value::Double(0.5)),
            ],
            error: Some("host unreachable".into()),
        };
        let root = SpanRecord {
            parent_span_id: None,
            error: None,
            attributes: Vec::new(),
            ..span.clone()
        };
        let text = protoc_text(&export_request(
            &[("service.name".into(), Value::Str("op".into()))],
            "scope-x",
            &[span, root],
        ));
        for expected in [
            r#"key: "service.name""#,
            r#"string_value: "op""#,
            r#"name: "scope-x""#,
            r#"trace_id: "\253\253\253\253\253\253\253\253\253\253\253\253\253\253\253\253""#,
            r#"span_id: "\001\002\003\004\005\006\007\010""#,
            r#"parent_span_id: "\t\t\t\t\t\t\t\t""#,
            r#"name: "provider.create""#,
            "kind: SPAN_KIND_CLIENT",
            "start_time_unix_nano: 1700000000123456789",
            "end_time_unix_nano: 1700000000128456789",
            r#"string_value: "lab \"1\"""#,
            "int_value: -42",
            "bool_value: true",
            "double_value: 0.5",
            r#"message: "host unreachable""#,
            "code: STATUS_CODE_ERROR",
        ] {
            assert!(text.contains(expected), "{expected} in:\n{text}");
        }
        // Two spans; only the first has a parent and a status.
        assert_eq!(
            text.lines().filter(|l| l.trim() == "spans {").count(),
            2,
            "{text}"
        );
        assert_eq!(text.matches("parent_span_id").count(), 1, "{text}");
        assert_eq!(text.matches("status {").count(), 1, "{text}");
    }
}

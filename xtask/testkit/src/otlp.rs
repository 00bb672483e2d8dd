//! OTLP requests read by the specification's own definitions: `protoc
//! --decode` with OpenTelemetry's `.proto` files (Debian's
//! `opentelemetry-proto` and `protobuf-compiler`, installed by `cargo xtask
//! setup`), so a test never checks an encoder against its mirror image.

use std::io::Write;
use std::process::{Command, Stdio};

/// `request`, an `ExportTraceServiceRequest`, as protoc's text format;
/// fails the test when protoc cannot decode it.
pub fn protoc_text(request: &[u8]) -> String {
    let mut child = Command::new("protoc")
        .args([
            "--decode=opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest",
            "-I/usr/include",
            "opentelemetry/proto/collector/trace/v1/trace_service.proto",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("protoc runs (cargo xtask setup installs it)");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(request)
        .expect("protoc reads the request");
    let out = child.wait_with_output().expect("protoc ends");
    assert!(
        out.status.success(),
        "protoc cannot decode the request: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("protoc prints UTF-8")
}

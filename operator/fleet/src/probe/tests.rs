//! The probe's protocol without sockets: each test drives [`Probe`] as the
//! operator's IO driver would, with the bytes a proxy could send.

use super::*;

fn target() -> ProbeTarget {
    ProbeTarget::parse("example.com:443").unwrap()
}

fn proxy() -> SocketAddr {
    "10.0.0.7:3128".parse().unwrap()
}

/// A probe that has sent its request.
fn awaiting() -> Probe {
    let mut p = Probe::new(proxy(), &target(), Duration::from_millis(500));
    p.connected();
    p.sent();
    p
}

/// The outcome of an answer arriving in `chunks`, then the end of the
/// stream if no verdict came first.
fn answer(chunks: &[&[u8]]) -> ProbeOutcome {
    let mut p = awaiting();
    for (i, c) in chunks.iter().enumerate() {
        let elapsed = Duration::from_millis(10 * (i as u64 + 1));
        if let Some(o) = p.received(c, elapsed) {
            return o;
        }
    }
    p.closed()
}

fn failure(o: &ProbeOutcome) -> &ProbeFailure {
    match o {
        ProbeOutcome::Unhealthy(f) => f,
        ProbeOutcome::Healthy { .. } => panic!("healthy: {o:?}"),
    }
}

fn kind(o: &ProbeOutcome) -> FailureKind {
    failure(o).kind
}

#[test]
fn the_request_is_a_connect_with_host() {
    let mut p = Probe::new(proxy(), &target(), Duration::from_secs(1));
    let request = String::from_utf8(p.connected()).unwrap();
    assert_eq!(
        request,
        "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\
         User-Agent: egress-proxies-probe\r\n\r\n"
    );
}

#[test]
fn status_200_is_healthy_with_the_latency_of_its_line() {
    let o = answer(&[b"HTTP/1.1 200 Connection established\r\n\r\n"]);
    assert_eq!(
        o,
        ProbeOutcome::Healthy {
            latency: Duration::from_millis(10)
        }
    );
    // Split anywhere, even inside the code: the line's last byte decides.
    let o = answer(&[b"HTTP/1.1 2", b"00 Connection established\r", b"\n\r\n"]);
    assert_eq!(
        o,
        ProbeOutcome::Healthy {
            latency: Duration::from_millis(30)
        }
    );
    assert!(answer(&[b"HTTP/1.0 200 Connection established\r\n"]).is_healthy());
}

#[test]
fn status_403_is_denied_and_others_are_rejections() {
    let o = answer(&[b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"]);
    assert_eq!(kind(&o), FailureKind::Denied);
    assert_eq!(FailureKind::Denied.reason(), Reason::ProbeDenied);
    assert_eq!(
        failure(&o).detail,
        "10.0.0.7:3128 denied CONNECT example.com:443 (403)"
    );
    for (bytes, code) in [
        (&b"HTTP/1.1 503 Service Unavailable\r\n\r\n"[..], 503),
        (b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", 407),
        (b"HTTP/1.0 204\r\n\r\n", 204),
    ] {
        assert_eq!(kind(&answer(&[bytes])), FailureKind::Status(code));
    }
    assert_eq!(FailureKind::Status(503).reason(), Reason::ProbeRejected);
}

#[test]
fn garbage_is_a_bad_response() {
    for bytes in [
        &b"SSH-2.0-OpenSSH_9.2\r\n"[..],
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/2 200\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n",
        b"HTTP/1.1 200OK\r\n",
    ] {
        let o = answer(&[bytes]);
        assert_eq!(kind(&o), FailureKind::BadResponse, "{bytes:?}");
    }
    assert_eq!(FailureKind::BadResponse.reason(), Reason::ProbeBadResponse);
}

#[test]
fn a_line_longer_than_the_limit_is_refused_and_not_kept() {
    let long = [b'A'; 300];
    let mut p = awaiting();
    let mut verdict = None;
    for _ in 0..10 {
        verdict = p.received(&long, Duration::ZERO);
        if verdict.is_some() {
            break;
        }
    }
    let o = verdict.expect("a verdict within the limit");
    assert_eq!(kind(&o), FailureKind::BadResponse);
    assert!(
        failure(&o)
            .detail
            .starts_with("no status line within 1024 bytes")
    );
    assert!(p.line.len() <= MAX_STATUS_LINE + 1);
    // A newline past the limit does not make it a status line either.
    let mut line = b"HTTP/1.1 200 ".to_vec();
    line.extend_from_slice(&[b'x'; MAX_STATUS_LINE]);
    line.extend_from_slice(b"\r\n");
    assert_eq!(kind(&answer(&[&line])), FailureKind::BadResponse);
}

#[test]
fn the_end_of_the_stream_is_closed_or_a_cut_line() {
    let o = awaiting().closed();
    assert_eq!(kind(&o), FailureKind::Closed);
    assert_eq!(FailureKind::Closed.reason(), Reason::ProbeBadResponse);
    let o = answer(&[b"HTTP/1.1 20"]);
    assert_eq!(kind(&o), FailureKind::BadResponse);
    assert!(failure(&o).detail.contains("ended mid-line"), "{o:?}");
}

#[test]
fn errors_and_timeouts_name_the_step_they_ended() {
    let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
    let reset = io::Error::from(io::ErrorKind::ConnectionReset);
    let mut p = Probe::new(proxy(), &target(), Duration::from_millis(500));
    assert_eq!(kind(&p.failed(&refused)), FailureKind::Refused);
    assert_eq!(FailureKind::Refused.reason(), Reason::ProbeUnreachable);
    assert_eq!(kind(&p.failed(&reset)), FailureKind::Unreachable);
    let steps = [
        "connect: no verdict from 10.0.0.7:3128 within 500 ms",
        "send CONNECT: no verdict from 10.0.0.7:3128 within 500 ms",
        "await answer: no verdict from 10.0.0.7:3128 within 500 ms",
    ];
    for (step, expected) in steps.iter().enumerate() {
        if step == 1 {
            p.connected();
            let f = p.failed(&reset);
            assert!(failure(&f).detail.starts_with("send CONNECT to"), "{f:?}");
        }
        if step == 2 {
            p.sent();
            // Past the connect, a refusal is just a broken connection.
            assert_eq!(kind(&p.failed(&refused)), FailureKind::Unreachable);
        }
        let o = p.timed_out();
        assert_eq!(kind(&o), FailureKind::Timeout);
        assert_eq!(failure(&o).detail, *expected);
    }
    assert_eq!(FailureKind::Timeout.reason(), Reason::ProbeTimeout);
}

#[test]
fn an_endless_timeout_is_cut() {
    let p = Probe::new(proxy(), &target(), Duration::MAX);
    assert_eq!(p.timeout(), MAX_PROBE_TIMEOUT);
}

#[test]
fn status_lines_parse_strictly() {
    for (line, code) in [
        (&b"HTTP/1.1 200 Connection established\r"[..], Some(200)),
        (b"HTTP/1.0 200", Some(200)),
        (b"HTTP/1.1 403 Forbidden", Some(403)),
        (b"HTTP/1.1 600 Nope", None),
        (b"HTTP/1.1 099 Nope", None),
        (b"HTTP/1.1 20", None),
        (b"HTTP/1.1 2000", None),
        (b"http/1.1 200 OK", None),
        (b"HTTP/1.1  200 OK", None),
        (b"", None),
    ] {
        assert_eq!(parse_status_line(line), code, "{line:?}");
    }
}

#[test]
fn targets_parse_and_print() {
    for (text, shown) in [
        ("example.com:443", "example.com:443"),
        ("Example.COM.:443", "example.com.:443"),
        ("192.0.2.1:8443", "192.0.2.1:8443"),
        ("[2001:db8::1]:443", "[2001:db8::1]:443"),
    ] {
        assert_eq!(ProbeTarget::parse(text).unwrap().to_string(), shown);
    }
    for bad in [
        "example.com",
        "example.com:0",
        "example.com:65536",
        "example.com:+443",
        ":443",
        "exa mple.com:443",
        "example.com\r\nX-Evil: 1:443",
        "-bad.com:443",
        "2001:db8::1:443",
        "[192.0.2.1]:443",
        "a..b:443",
    ] {
        assert!(
            matches!(
                ProbeTarget::parse(bad),
                Err(Error::InvalidProbeTarget { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn base64_is_rfc_4648() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("Aladdin:open sesame", "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
    ] {
        assert_eq!(super::base64(plain.as_bytes()), encoded, "{plain:?}");
    }
}

#[test]
fn basic_auth_goes_in_the_connect_and_never_in_debug() {
    let target = ProbeTarget::parse("example.com:443").unwrap();
    let proxy = "10.0.0.7:3128".parse().unwrap();
    let mut p =
        Probe::new(proxy, &target, Duration::from_secs(5)).with_basic_auth("egress", "s3cret");
    assert!(!format!("{p:?}").contains("ZWdyZXNzOnMzY3JldA"));
    let request = String::from_utf8(p.connected()).unwrap();
    assert!(
        request.contains("\r\nProxy-Authorization: Basic ZWdyZXNzOnMzY3JldA==\r\n"),
        "{request}"
    );
    let mut plain = Probe::new(proxy, &target, Duration::from_secs(5));
    assert!(
        !String::from_utf8(plain.connected())
            .unwrap()
            .contains("Authorization")
    );
}

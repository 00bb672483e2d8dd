//! The probe's IO against loopback servers started here: a Squid-like
//! responder scripted per case (the real Squid comes with the guest image).
//! The verdicts themselves are `fleet::Probe`'s, table-tested there without
//! sockets; these tests are about the socket and the deadline.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep};

use fleet::{FailureKind, ProbeTarget};

use super::*;

/// A plain probe of `proxy` over TCP.
async fn probe(proxy: SocketAddr, target: &ProbeTarget, timeout: Duration) -> ProbeOutcome {
    super::run(
        TcpStream::connect(proxy),
        Probe::new(proxy, target, timeout),
    )
    .await
}

/// A plain probe over the connection `connect` opens.
async fn probe_over<C, S>(
    connect: C,
    proxy: SocketAddr,
    target: &ProbeTarget,
    timeout: Duration,
) -> ProbeOutcome
where
    C: Future<Output = io::Result<S>>,
    S: AsyncRead + AsyncWrite + Unpin,
{
    super::run(connect, Probe::new(proxy, target, timeout)).await
}

/// What the fake proxy does after reading the request.
#[derive(Clone)]
enum Script {
    /// Writes these chunks, pausing between them, then holds the
    /// connection open for a while.
    Answer(Vec<&'static [u8]>, Duration),
    /// Reads the request and never answers.
    Silent,
    /// Closes at once after the request.
    Close,
    /// Writes one byte every 20 ms, forever, never a newline.
    Trickle,
}

/// A one-connection fake proxy on 127.0.0.1; yields what it received.
async fn fake_proxy(script: Script) -> (SocketAddr, oneshot::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 512];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 8192 {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(request);
        match script {
            Script::Answer(chunks, pause) => {
                for c in chunks {
                    if sock.write_all(c).await.is_err() {
                        return;
                    }
                    sleep(pause).await;
                }
                sleep(Duration::from_secs(5)).await;
            }
            Script::Silent => sleep(Duration::from_secs(30)).await,
            Script::Close => {}
            Script::Trickle => loop {
                if sock.write_all(b"x").await.is_err() {
                    return;
                }
                sleep(Duration::from_millis(20)).await;
            },
        }
    });
    (addr, rx)
}

fn target() -> ProbeTarget {
    ProbeTarget::parse("example.com:443").unwrap()
}

async fn run(script: Script) -> ProbeOutcome {
    let (addr, _rx) = fake_proxy(script).await;
    probe(addr, &target(), Duration::from_millis(500)).await
}

fn kind(o: &ProbeOutcome) -> FailureKind {
    match o {
        ProbeOutcome::Unhealthy(f) => f.kind,
        ProbeOutcome::Healthy { .. } => panic!("healthy: {o:?}"),
    }
}

fn answer(bytes: &'static [u8]) -> Script {
    Script::Answer(vec![bytes], Duration::ZERO)
}

#[tokio::test]
async fn status_200_is_healthy_and_the_request_is_a_connect_with_host() {
    let (addr, rx) = fake_proxy(answer(b"HTTP/1.1 200 Connection established\r\n\r\n")).await;
    let outcome = probe(addr, &target(), Duration::from_secs(2)).await;
    assert!(outcome.is_healthy(), "{outcome:?}");
    let request = String::from_utf8(rx.await.unwrap()).unwrap();
    assert!(
        request.starts_with("CONNECT example.com:443 HTTP/1.1\r\n"),
        "{request}"
    );
    assert!(
        request.contains("\r\nHost: example.com:443\r\n"),
        "{request}"
    );
    assert!(request.ends_with("\r\n\r\n"));
}

#[tokio::test]
async fn an_endless_timeout_is_cut_not_a_panic() {
    let (addr, _rx) = fake_proxy(answer(b"HTTP/1.1 200 OK\r\n\r\n")).await;
    assert!(probe(addr, &target(), Duration::MAX).await.is_healthy());
}

#[tokio::test]
async fn http_1_0_and_a_split_status_line_are_read() {
    assert!(
        run(answer(b"HTTP/1.0 200 Connection established\r\n\r\n"))
            .await
            .is_healthy()
    );
    let split = Script::Answer(
        vec![b"HTTP/1.1 2", b"00 Connection established\r", b"\n\r\n"],
        Duration::from_millis(30),
    );
    assert!(run(split).await.is_healthy());
}

#[tokio::test]
async fn silence_times_out_within_the_deadline() {
    let started = Instant::now();
    let o = run(Script::Silent).await;
    assert_eq!(kind(&o), FailureKind::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_trickle_without_a_line_is_bounded_by_the_whole_probe_deadline() {
    let started = Instant::now();
    let o = run(Script::Trickle).await;
    // 500 ms at a byte per 20 ms never reaches the line limit: the overall
    // deadline ends it, not a per-read one.
    assert_eq!(kind(&o), FailureKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_long_line_over_many_reads_is_a_bad_response() {
    let o = run(answer(&[b'A'; 2000])).await;
    assert_eq!(kind(&o), FailureKind::BadResponse);
}

#[tokio::test]
async fn a_close_without_answer_is_reported() {
    let o = run(Script::Close).await;
    assert_eq!(kind(&o), FailureKind::Closed);
    let o = run(Script::Answer(vec![b"HTTP/1.1 20"], Duration::ZERO)).await;
    // Half a line, then the connection stays open: the deadline decides.
    assert_eq!(kind(&o), FailureKind::Timeout);
}

#[tokio::test]
async fn a_refused_port_is_unreachable() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let o = probe(addr, &target(), Duration::from_secs(2)).await;
    assert_eq!(kind(&o), FailureKind::Refused);
}

#[tokio::test]
async fn a_connect_that_fails_or_hangs_is_judged_by_its_step() {
    let addr: SocketAddr = "192.0.2.1:3128".parse().unwrap();
    let failing = async { Err::<tokio::io::DuplexStream, _>(io::Error::other("no route")) };
    let o = probe_over(failing, addr, &target(), Duration::from_secs(2)).await;
    assert_eq!(kind(&o), FailureKind::Unreachable);
    let hanging = std::future::pending::<io::Result<tokio::io::DuplexStream>>();
    let started = Instant::now();
    let o = probe_over(hanging, addr, &target(), Duration::from_millis(100)).await;
    assert_eq!(kind(&o), FailureKind::Timeout);
    assert!(started.elapsed() < Duration::from_secs(2));
    let ProbeOutcome::Unhealthy(f) = o else {
        unreachable!()
    };
    assert!(f.detail.starts_with("connect: "), "{}", f.detail);
}

#[tokio::test]
async fn any_stream_will_do() {
    let (ours, mut theirs) = tokio::io::duplex(1024);
    let addr: SocketAddr = "192.0.2.1:3128".parse().unwrap();
    let proxy = tokio::spawn(async move {
        let mut request = [0u8; 512];
        let n = theirs.read(&mut request).await.unwrap();
        theirs.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        n
    });
    let o = probe_over(async { Ok(ours) }, addr, &target(), Duration::from_secs(2)).await;
    assert!(o.is_healthy(), "{o:?}");
    assert!(proxy.await.unwrap() > 0);
}

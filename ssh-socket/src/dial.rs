//! `dial`: files, TCP, handshake with host key check, auth, channel open —
//! each stage with its own error, the whole under one timeout.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use russh::Channel;
use russh::client::{Handle, Msg};
use russh::keys::PrivateKeyWithHashAlg;
use tokio::net::TcpStream;

use crate::config::{HostKeyPolicy, SshConfig};
use crate::error::{Error, Stage};
use crate::files;
use crate::handler::{ClientHandler, HostCheck, Refusal};
use crate::known_hosts;
use crate::link::Link;
use crate::private_key::{self, Credentials};
use crate::socket::SshSocket;
use crate::supervisor::Supervisor;
use tracing::Instrument;

use crate::tcp::{self, KillSwitch, LastReceive, Transport, Watched};
use russh::keys::agent::AgentIdentity;

/// Connects to `config.host` (through `config.jumps`, if any),
/// authenticates with the key file, and opens a `direct-streamlocal`
/// channel to `config.remote_socket`.
///
/// Through jump hosts, each hop's session runs inside a `direct-tcpip`
/// channel of the one before, all over the one TCP connection to the first
/// hop: the socket's watchdog listens to the innermost session, so a frozen
/// bastion or a frozen target alike ends the link, and teardown resets that
/// one TCP connection, which ends every session at once (invariant 1 holds
/// through any number of hops). Errors name the hop that failed.
///
/// The key file and the known_hosts file are read anew on every call.
/// With [`HostKeyPolicy::InsecureIgnoreHostKey`] a warning is logged on
/// every call. Nothing is retried: a failure is reported with the stage it
/// happened in, and [`Error::is_permanent`] says whether retrying can help.
///
/// # Errors
/// One [`Error`] per stage: key file ([`Error::KeyFileUnreadable`],
/// [`Error::KeyEncrypted`], [`Error::KeyInvalid`]), known_hosts
/// ([`Error::KnownHostsUnreadable`]), TCP ([`Error::Resolve`],
/// [`Error::TcpConnect`]), handshake ([`Error::Handshake`],
/// [`Error::HostKeyUnknown`], [`Error::HostKeyChanged`],
/// [`Error::HostKeyRevoked`], [`Error::HostKeyNotCertified`]),
/// authentication ([`Error::AuthRejected`], [`Error::AuthInterrupted`]),
/// channel ([`Error::ChannelOpenRefused`], [`Error::ChannelOpen`]), and
/// [`Error::Timeout`] when the whole dial exceeds
/// [`SshConfig::connect_timeout`].
///
/// # Cancel safety
/// Cancel safe: dropping the future (or the timeout firing) resets the TCP
/// connection, which ends russh's session task; nothing is left running.
///
/// # Panics
/// Must be called within a tokio runtime (it spawns the connection's tasks).
pub async fn dial(config: &SshConfig) -> Result<SshSocket, Error> {
    let stage = Progress::default();
    let span = dial_span(config);
    let fut = dial_stages(config, None, &stage).instrument(span.clone());
    let result = match tokio::time::timeout(config.connect_timeout, fut).await {
        Ok(result) => result,
        Err(_) => Err(timeout_error(config, &stage)),
    };
    record_outcome(&span, result.as_ref().err());
    result
}

/// The dial's span (INFO, `ssh.dial`): host, port, user, jump count, and
/// on failure the error; never a key or a passphrase.
fn dial_span(config: &SshConfig) -> tracing::Span {
    tracing::info_span!(
        "ssh.dial",
        host = %config.host,
        port = config.port,
        user = %config.user,
        jumps = config.jumps.len(),
        error.class = tracing::field::Empty,
        error.message = tracing::field::Empty,
    )
}

fn record_outcome(span: &tracing::Span, error: Option<&Error>) {
    if let Some(e) = error {
        span.record(
            "error.class",
            if e.is_permanent() {
                "permanent"
            } else {
                "transient"
            },
        );
        span.record("error.message", tracing::field::display(e));
    }
}

/// Like [`dial`], over a TCP connection the caller opened (for socket
/// options of its own: buffer sizes, a bound source address, a proxy).
///
/// # Errors
/// As [`dial`], minus the TCP stage.
///
/// # Cancel safety
/// As [`dial`]: dropping the future resets `tcp`.
///
/// # Panics
/// As [`dial`]: must be called within a tokio runtime.
pub async fn dial_over(config: &SshConfig, tcp: TcpStream) -> Result<SshSocket, Error> {
    let stage = Progress::default();
    let span = dial_span(config);
    let fut = dial_stages(config, Some(tcp), &stage).instrument(span.clone());
    let result = match tokio::time::timeout(config.connect_timeout, fut).await {
        Ok(result) => result,
        Err(_) => Err(timeout_error(config, &stage)),
    };
    record_outcome(&span, result.as_ref().err());
    result
}

const STAGES: [Stage; 5] = [
    Stage::Files,
    Stage::TcpConnect,
    Stage::Handshake,
    Stage::Auth,
    Stage::ChannelOpen,
];

/// How far a dial got: the stage, and the hop (0 = the first jump host,
/// `jumps.len()` = the target) — what a timeout names.
#[derive(Default)]
struct Progress {
    stage: AtomicU8,
    hop: AtomicU8,
}

fn enter(progress: &Progress, s: Stage) {
    let index = STAGES.iter().position(|x| *x == s).unwrap_or(0);
    progress
        .stage
        .store(u8::try_from(index).unwrap_or(0), Ordering::Relaxed);
}

fn timeout_error(config: &SshConfig, progress: &Progress) -> Error {
    let index = usize::from(progress.stage.load(Ordering::Relaxed));
    let hop = usize::from(progress.hop.load(Ordering::Relaxed));
    let (host, port) = match config.jumps.get(hop) {
        Some(jump) => (jump.host.clone(), jump.port),
        None => (config.host.clone(), config.port),
    };
    Error::Timeout {
        host,
        port,
        timeout: config.connect_timeout,
        stage: STAGES.get(index).copied().unwrap_or(Stage::Files),
    }
}

async fn dial_stages(
    config: &SshConfig,
    tcp: Option<TcpStream>,
    stage: &Progress,
) -> Result<SshSocket, Error> {
    // Every hop's config, the target last.
    let mut hops: Vec<SshConfig> = config.jumps.iter().map(|j| j.as_hop(config)).collect();
    hops.push(config.clone());

    enter(stage, Stage::Files);
    let mut credentials = Vec::with_capacity(hops.len());
    for hop in &hops {
        let key = private_key::load(&hop.key, hop.key_passphrase.as_ref()).await?;
        credentials.push((key, host_check(hop).await?));
    }

    enter(stage, Stage::TcpConnect);
    // `hops` holds at least the target.
    let first = hops.first().unwrap_or(config);
    let stream = match tcp {
        Some(stream) => stream,
        None => tcp::connect(&first.host, first.port).await?,
    };
    // From here on, leaving this function by any path (error, timeout,
    // cancellation) resets the connection, which ends every hop's session
    // task.
    let kill = KillSwitch::new(&stream).map_err(|source| Error::TcpConnect {
        host: first.host.clone(),
        port: first.port,
        source,
    })?;

    // Each hop's session death marks the link dead too (its handler's
    // drop), so a bastion that hangs up ends the socket.
    let link = Link::new();
    let mut transport: Box<dyn Transport> = Box::new(tcp::QuickAck::new(stream));
    let mut outer = Vec::with_capacity(config.jumps.len());
    let mut credentials = credentials.into_iter();
    let mut target = None;
    for (i, hop) in hops.iter().enumerate() {
        stage
            .hop
            .store(u8::try_from(i).unwrap_or(u8::MAX), Ordering::Relaxed);
        let Some((key, host_check)) = credentials.next() else {
            break;
        };
        enter(stage, Stage::Handshake);
        let last_receive = LastReceive::new();
        let watched = Watched::new(transport, Arc::clone(&last_receive));
        let mut session = handshake(hop, watched, host_check, Arc::clone(&link)).await?;
        enter(stage, Stage::Auth);
        authenticate(hop, &mut session, key).await?;
        match hops.get(i + 1) {
            Some(next) => {
                enter(stage, Stage::ChannelOpen);
                transport = Box::new(open_forward(hop, &session, next).await?.into_stream());
                outer.push(session);
            }
            None => {
                target = Some((session, last_receive));
                break;
            }
        }
    }
    let Some((handle, last_receive)) = target else {
        // `hops` ends with the target, which the loop always reaches.
        return Err(Error::SessionEnded {
            detail: "no session to the target".to_owned(),
        });
    };

    enter(stage, Stage::ChannelOpen);
    let channel = open_channel(config, &handle).await?;

    let socket = SshSocket::new(channel, Arc::clone(&link));
    let supervisor = Supervisor {
        link,
        handle,
        jumps: outer,
        kill,
        last_receive,
        dead_after: config.keepalive.dead_after(),
    };
    // Owned by the link: it ends within a bounded time after the socket is
    // closed, dropped or dies.
    tokio::spawn(supervisor.run());
    Ok(socket)
}

/// How the server's host key will be judged: the known_hosts file's text
/// (a missing file is an empty one, judged at the handshake), or not at
/// all (warned about).
async fn host_check(config: &SshConfig) -> Result<HostCheck, Error> {
    let (host, port) = (config.host.as_str(), config.port);
    match &config.host_keys {
        HostKeyPolicy::KnownHosts(path) => {
            let text = match files::read_text(path, files::MAX_KNOWN_HOSTS).await {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(source) => {
                    return Err(Error::KnownHostsUnreadable {
                        path: path.clone(),
                        source,
                    });
                }
            };
            Ok(HostCheck::KnownHosts {
                path: path.clone(),
                text,
                host_entry: known_hosts::host_entry(host, port),
                host: host.to_ascii_lowercase(),
            })
        }
        HostKeyPolicy::InsecureIgnoreHostKey => {
            tracing::warn!(
                host,
                port,
                "SSH host key verification is DISABLED (insecure_ignore_host_key): \
                 any server, including a man-in-the-middle, is accepted"
            );
            Ok(HostCheck::Insecure)
        }
    }
}

/// The SSH handshake over `stream`; the handler's host-key verdict, when it
/// refused, is the error.
async fn handshake(
    config: &SshConfig,
    stream: Watched,
    host_check: HostCheck,
    link: Arc<Link>,
) -> Result<Handle<ClientHandler>, Error> {
    let refusal: Refusal = Arc::new(Mutex::new(None));
    let handler = ClientHandler::new(link, host_check, Arc::clone(&refusal));
    let offered = host_key_order(&handler);
    // A host an `@cert-authority` line names is asked for its certificate
    // first (the same algorithms, as certificates); others never are.
    let certificates = match handler.known_hosts() {
        Some((text, host_entry)) if known_hosts::has_authority(text, host_entry) => offered.clone(),
        _ => Vec::new(),
    };
    let handshake =
        russh::client::connect_stream(russh_config(config, offered, certificates), stream, handler)
            .await;
    let take_refusal = || {
        refusal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    };
    let handle = match handshake {
        Ok(handle) => handle,
        Err(source) => {
            return Err(take_refusal().unwrap_or_else(|| Error::Handshake {
                host: config.host.clone(),
                port: config.port,
                source: source.into(),
            }));
        }
    };
    match take_refusal() {
        Some(refused) => Err(refused),
        None => Ok(handle),
    }
}

/// Public key authentication with `credentials`: each key, or each of the
/// agent's keys, in turn until one is accepted (RSA keys sign with the best
/// hash the server accepts).
async fn authenticate(
    config: &SshConfig,
    handle: &mut Handle<ClientHandler>,
    credentials: Credentials,
) -> Result<(), Error> {
    let (host, port) = (config.host.as_str(), config.port);
    let interrupted = |source: russh::Error| Error::AuthInterrupted {
        host: host.to_owned(),
        port,
        source: source.into(),
    };
    let accepted = match credentials {
        Credentials::Keys(keys) => {
            let mut accepted = false;
            for key in keys {
                let hash = rsa_hash(handle, key.algorithm().is_rsa())
                    .await
                    .map_err(interrupted)?;
                accepted = handle
                    .authenticate_publickey(
                        config.user.clone(),
                        PrivateKeyWithHashAlg::new(key, hash),
                    )
                    .await
                    .map_err(interrupted)?
                    .success();
                if accepted {
                    break;
                }
            }
            accepted
        }
        Credentials::Agent {
            path,
            mut client,
            identities,
        } => {
            let mut accepted = false;
            for identity in identities {
                let AgentIdentity::PublicKey { key, .. } = identity else {
                    continue;
                };
                let hash = rsa_hash(handle, key.algorithm().is_rsa())
                    .await
                    .map_err(interrupted)?;
                let auth = handle
                    .authenticate_publickey_with(config.user.clone(), key, hash, &mut client)
                    .await
                    .map_err(|e| Error::AgentUnavailable {
                        path: path.clone(),
                        reason: format!("signing failed: {e}"),
                    })?;
                if auth.success() {
                    accepted = true;
                    break;
                }
            }
            accepted
        }
    };
    if accepted {
        Ok(())
    } else if handle.is_closed() {
        Err(interrupted(russh::Error::Disconnect))
    } else {
        Err(Error::AuthRejected {
            host: host.to_owned(),
            port,
            user: config.user.clone(),
        })
    }
}

/// The hash an RSA key signs with: the best the server accepts (waiting
/// at most 1 s for its list); `None` for other keys. SHA-1 `ssh-rsa` is
/// never chosen: modern servers refuse it.
async fn rsa_hash(
    handle: &Handle<ClientHandler>,
    is_rsa: bool,
) -> Result<Option<russh::keys::HashAlg>, russh::Error> {
    if !is_rsa {
        return Ok(None);
    }
    Ok(handle
        .best_supported_rsa_hash()
        .await?
        .flatten()
        .or(Some(russh::keys::HashAlg::Sha512)))
}

/// Asks jump host `hop` to open a TCP connection to `next` (a
/// `direct-tcpip` channel), which the next hop's session runs over.
async fn open_forward(
    hop: &SshConfig,
    session: &Handle<ClientHandler>,
    next: &SshConfig,
) -> Result<Channel<Msg>, Error> {
    session
        .channel_open_direct_tcpip(next.host.clone(), u32::from(next.port), "127.0.0.1", 0)
        .await
        .map_err(|source| match source {
            russh::Error::ChannelOpenFailure(reason) => Error::JumpRefused {
                host: hop.host.clone(),
                port: hop.port,
                to: format!("{}:{}", next.host, next.port),
                prohibited: matches!(
                    reason,
                    russh::ChannelOpenFailure::AdministrativelyProhibited
                ),
                reason: format!("{reason:?}"),
            },
            source => Error::ChannelOpen {
                host: hop.host.clone(),
                port: hop.port,
                source: source.into(),
            },
        })
}

/// Opens the `direct-streamlocal` channel to the remote socket.
async fn open_channel(
    config: &SshConfig,
    handle: &Handle<ClientHandler>,
) -> Result<Channel<Msg>, Error> {
    let (host, port) = (config.host.as_str(), config.port);
    handle
        .channel_open_direct_streamlocal(config.remote_socket.clone())
        .await
        .map_err(|source| match source {
            russh::Error::ChannelOpenFailure(reason) => Error::ChannelOpenRefused {
                host: host.to_owned(),
                port,
                socket: config.remote_socket.clone(),
                reason: format!(
                    "{reason:?} (the socket is missing or refuses connections, \
                     or sshd forbids stream-local forwarding)"
                ),
            },
            source => Error::ChannelOpen {
                host: host.to_owned(),
                port,
                source: source.into(),
            },
        })
}

/// The host key algorithms to offer: russh's default order, with those of
/// the keys known_hosts lists for the host first (invariant: a host OpenSSH
/// reaches with the same known_hosts is reached here too).
fn host_key_order(handler: &ClientHandler) -> Vec<russh::keys::Algorithm> {
    let offered = &russh::Preferred::DEFAULT.key;
    match handler.known_hosts() {
        Some((text, host_entry)) => known_hosts::preferred_algorithms(text, host_entry, offered),
        None => offered.to_vec(),
    }
}

/// russh's settings for one dial, offering host key algorithms in the
/// order `host_keys`, and the certificate variants of `certificates`
/// ahead of them.
fn russh_config(
    config: &SshConfig,
    host_keys: Vec<russh::keys::Algorithm>,
    certificates: Vec<russh::keys::Algorithm>,
) -> Arc<russh::client::Config> {
    let keepalive = config.keepalive;
    Arc::new(russh::client::Config {
        keepalive_interval: Some(keepalive.effective_interval()),
        keepalive_max: usize::try_from(keepalive.max_missed).unwrap_or(usize::MAX),
        // A backstop behind the supervisor's own watchdog: it also bounds
        // russh's flushes to a peer that stopped reading.
        inactivity_timeout: Some(keepalive.dead_after()),
        nodelay: true,
        // AES-GCM first: hardware AES on every x86_64 hypervisor makes it
        // the cheapest per byte (measured by benches/throughput.rs);
        // chacha20-poly1305 and AES-CTR remain on offer.
        preferred: russh::Preferred {
            cipher: std::borrow::Cow::Borrowed(&[
                russh::cipher::AES_256_GCM,
                russh::cipher::CHACHA20_POLY1305,
                russh::cipher::AES_256_CTR,
                russh::cipher::AES_128_CTR,
            ]),
            key: std::borrow::Cow::Owned(host_keys),
            host_key_certificates: std::borrow::Cow::Owned(certificates),
            ..russh::Preferred::DEFAULT
        },
        ..Default::default()
    })
}

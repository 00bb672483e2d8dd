//! Keys from memory and from a real ssh-agent (OpenSSH's), against the
//! sandbox's sshd.

use std::path::PathBuf;
use std::time::Duration;

use ssh_socket::{Error, KeySource, KeyText};
use testkit::Descriptor;
use testkit::sshd::{Agent, OwnSshd, new_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{UnixServer, own_config, sandbox_config};

/// One round trip through a dialled socket.
async fn ping(mut socket: ssh_socket::SshSocket) {
    socket.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut got))
        .await
        .expect("echo in time")
        .unwrap();
    assert_eq!(&got, b"ping");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_held_in_memory_dials_and_is_never_shown() {
    let d = Descriptor::require();
    let server = UnixServer::echo();
    let text = std::fs::read_to_string(&d.ssh.key_path).unwrap();
    let config =
        sandbox_config(&server.path).with_key(KeySource::Memory(KeyText::new(text.clone())));
    assert!(!format!("{config:?}").contains(text.lines().nth(1).unwrap()));
    ping(
        ssh_socket::dial(&config)
            .await
            .expect("dial with the key in memory"),
    )
    .await;

    let garbage =
        "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n";
    let config = sandbox_config(&server.path).with_key(KeySource::Memory(KeyText::new(garbage)));
    let err = ssh_socket::dial(&config).await.unwrap_err();
    assert!(matches!(err, Error::KeyInvalid { .. }), "{err:?}");
    assert!(err.to_string().contains("(key in memory)"), "{err}");
    assert!(!format!("{err} {err:?}").contains("bm90IGEga2V5"));
}

/// Against an sshd of the test's own: the refused keys below count as
/// failed logins, which OpenSSH's `PerSourcePenalties` holds against the
/// source address every test shares when dialling the sandbox's sshd.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_files_are_tried_in_turn_and_missing_ones_skipped() {
    let sshd = OwnSshd::start("");
    let server = UnixServer::echo();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("id_missing");
    let config =
        |files: Vec<PathBuf>| own_config(&sshd, &server.path).with_key(KeySource::Files(files));
    // A real key the server does not know, then the one it does: the
    // first is refused, the second accepted, as OpenSSH's IdentityFiles.
    let stranger = new_key(dir.path(), "stranger");
    let dialled = ssh_socket::dial(&config(vec![
        missing.clone(),
        stranger.clone(),
        sshd.client_key.clone(),
    ]))
    .await;
    ping(dialled.expect("the second key")).await;
    // Only keys the server refuses: rejected, not a file error.
    let err = ssh_socket::dial(&config(vec![missing.clone(), stranger.clone()]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::AuthRejected { .. }), "{err:?}");
    // None exists: the first is named.
    let err = ssh_socket::dial(&config(vec![missing.clone(), dir.path().join("b")]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::KeyFileUnreadable { path, .. } if *path == missing),
        "{err:?}"
    );
    // A file that exists but is no key fails the dial (a typo must show).
    let garbage = dir.path().join("garbage");
    std::fs::write(&garbage, "not a key").unwrap();
    let err = ssh_socket::dial(&config(vec![garbage, sshd.client_key.clone()]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::KeyInvalid { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_keys_are_offered_in_turn() {
    let d = Descriptor::require();
    let server = UnixServer::echo();
    let agent = Agent::start();

    // Empty: a typed, permanent error naming the agent.
    let config = sandbox_config(&server.path).with_key(KeySource::Agent(agent.socket.clone()));
    let err = ssh_socket::dial(&config).await.unwrap_err();
    assert!(matches!(err, Error::AgentUnavailable { .. }), "{err:?}");
    assert!(
        err.is_permanent() && err.to_string().contains("holds no keys"),
        "{err}"
    );

    // A key the server does not accept first, then the right one.
    let dir = tempfile::tempdir().unwrap();
    let stranger = new_key(dir.path(), "stranger");
    agent.add(&stranger);
    let err = ssh_socket::dial(&config).await.unwrap_err();
    assert!(err.is_auth(), "only the stranger's key: {err:?}");
    agent.add(&d.ssh.key_path);
    ping(
        ssh_socket::dial(&config)
            .await
            .expect("the agent's second key"),
    )
    .await;

    // No agent there.
    let config =
        sandbox_config(&server.path).with_key(KeySource::Agent(dir.path().join("none.sock")));
    let err = ssh_socket::dial(&config).await.unwrap_err();
    assert!(matches!(err, Error::AgentUnavailable { .. }), "{err:?}");
}

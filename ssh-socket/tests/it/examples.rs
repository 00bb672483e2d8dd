//! The user example (`examples/forward.rs`), compiled into this binary and
//! run as its `main` would run it, against sshd instances of the test's
//! own: a host whose certificate is trusted through `@cert-authority`,
//! reached through a bastion, with the key in an ssh-agent — all named by
//! an OpenSSH config file, as a user's `~/.ssh/config` would.

use std::time::{Duration, Instant};

use testkit::sshd::{Agent, OwnSshd, new_key, public_key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::UnixServer;

#[allow(dead_code)] // its `main`
#[path = "../../examples/forward.rs"]
mod forward;

/// A writer the test reads while the example runs.
#[derive(Clone, Default)]
struct SharedOut(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for SharedOut {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedOut {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forward_example_reaches_a_certified_host_behind_a_bastion_with_an_agent_key() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_key(dir.path(), "ca");
    let target = OwnSshd::start_certified("", &ca, "127.0.0.1", "-5m:+1h");
    let bastion = OwnSshd::start("");
    let agent = Agent::start();
    agent.add(&target.client_key);
    let remote = UnixServer::echo();
    // The target is trusted only through its authority.
    let known_hosts = dir.path().join("known_hosts");
    std::fs::write(
        &known_hosts,
        format!(
            "@cert-authority [127.0.0.1]:{} {}\n",
            target.port,
            public_key(&ca)
        ),
    )
    .unwrap();
    let config = dir.path().join("config");
    let block = target.ssh_config_block(
        "hv1",
        &[
            format!("IdentityAgent {}", agent.socket.display()),
            format!("UserKnownHostsFile {}", known_hosts.display()),
            "ProxyJump bastion".to_owned(),
        ],
    ) + &bastion.ssh_config_block("bastion", &[]);
    std::fs::write(&config, block).unwrap();
    let local = dir.path().join("hv1.sock");
    let args = [
        "-F".to_owned(),
        config.display().to_string(),
        "hv1".to_owned(),
        remote.path.display().to_string(),
        local.display().to_string(),
    ];
    let out = SharedOut::default();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let mut writer = out.clone();
    let running = forward::run(&args, &mut writer, async {
        let _ = stop_rx.await;
    });
    let drive = async {
        let started = Instant::now();
        while !out.text().contains("forwarding ") {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "not forwarding: {}",
                out.text()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            out.text()
                .contains(&format!("@127.0.0.1:{} -> ", bastion.port)),
            "{}",
            out.text()
        );
        // Two local connections, each through its own SSH connection.
        for round in 0..2u8 {
            let mut c = tokio::net::UnixStream::connect(&local).await.unwrap();
            c.write_all(&[round; 3]).await.unwrap();
            let mut got = [0u8; 3];
            tokio::time::timeout(Duration::from_secs(20), c.read_exact(&mut got))
                .await
                .expect("echo through the forward")
                .unwrap();
            assert_eq!(got, [round; 3]);
        }
        stop_tx.send(()).unwrap();
    };
    let (result, ()) = tokio::time::timeout(Duration::from_secs(90), async {
        tokio::join!(running, drive)
    })
    .await
    .expect("the forward runs and stops within 90 s");
    result.unwrap_or_else(|e| panic!("{e}: {}", out.text()));
    assert!(!local.exists(), "the local socket is removed");
}

#[tokio::test]
async fn forward_example_says_a_wrong_host_key_will_not_pass() {
    let dir = tempfile::tempdir().unwrap();
    let target = OwnSshd::start("");
    let empty = dir.path().join("known_hosts");
    std::fs::write(&empty, "").unwrap();
    let config = dir.path().join("config");
    let block =
        target.ssh_config_block("hv1", &[format!("UserKnownHostsFile {}", empty.display())]);
    std::fs::write(&config, block).unwrap();
    let local = dir.path().join("x.sock");
    let args = [
        "-F".to_owned(),
        config.display().to_string(),
        "hv1".to_owned(),
        "/nonexistent.sock".to_owned(),
        local.display().to_string(),
    ];
    let e = forward::run(&args, &mut Vec::new(), std::future::pending())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("retrying will not help"), "{e}");
    assert!(
        !local.exists(),
        "no socket made for a link that cannot work"
    );
}

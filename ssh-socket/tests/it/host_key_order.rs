//! A host with several host keys, and a known_hosts that lists only some of
//! them (as `ssh-keyscan -t rsa` or an older file gives): OpenSSH's own
//! client reaches the host with those files, so ssh-socket must too — it
//! offers the listed key types first, and the server answers with one the
//! file can check.

use std::process::Command;

use crate::support::{UnixServer, own_config};
use testkit::sshd::{OwnSshd, keygen};

/// An sshd with ed25519 (its own), ECDSA and RSA host keys.
fn sshd_with_three_host_keys(keys: &tempfile::TempDir) -> OwnSshd {
    let mut extra = String::new();
    for kind in ["ecdsa", "rsa"] {
        let path = keys.path().join(format!("host_{kind}"));
        keygen(&path, kind, "");
        extra.push_str(&format!("HostKey {}\n", path.display()));
    }
    OwnSshd::start(&extra)
}

/// `ssh-keyscan -t kind` of the sshd: its one key of that type.
fn keyscan(sshd: &OwnSshd, kind: &str) -> String {
    let out = Command::new("ssh-keyscan")
        .args(["-t", kind, "-p", &sshd.port.to_string(), "127.0.0.1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.lines().any(|l| !l.starts_with('#') && !l.is_empty()),
        "ssh-keyscan -t {kind} found no key: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// OpenSSH's client, with the same key and known_hosts, strict checking.
fn openssh_reaches(sshd: &OwnSshd) -> bool {
    Command::new("ssh")
        .args(["-F", "/dev/null", "-o", "BatchMode=yes"])
        .args(["-o", "StrictHostKeyChecking=yes"])
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", sshd.known_hosts.display()))
        .arg("-i")
        .arg(&sshd.client_key)
        .args(["-p", &sshd.port.to_string()])
        .arg(format!("{}@127.0.0.1", sshd.user))
        .arg("true")
        .status()
        .unwrap()
        .success()
}

#[tokio::test]
async fn known_hosts_listing_only_some_host_keys_is_enough_as_for_openssh() {
    let keys = tempfile::tempdir().unwrap();
    let sshd = sshd_with_three_host_keys(&keys);
    let server = UnixServer::echo();
    for kind in ["rsa", "ecdsa-sha2-nistp256", "ssh-ed25519"] {
        std::fs::write(&sshd.known_hosts, keyscan(&sshd, kind)).unwrap();
        assert!(
            openssh_reaches(&sshd),
            "OpenSSH refused with only the {kind} key listed"
        );
        let socket = ssh_socket::dial(&own_config(&sshd, &server.path))
            .await
            .unwrap_or_else(|e| panic!("only the {kind} key listed: {e}"));
        socket.close();
    }
}

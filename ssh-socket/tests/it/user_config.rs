//! `UserConfig`: what it reads from an OpenSSH client config agrees with
//! OpenSSH's own reading of the same file (`ssh -G`), and a dial built from
//! it reaches a host behind a bastion as `ssh alias` would.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use ssh_socket::UserConfig;
use testkit::sshd::OwnSshd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::UnixServer;

/// OpenSSH's reading of `alias` in config `file` (`ssh -G`): its
/// `keyword value` lines.
fn ssh_g(file: &Path, alias: &str) -> Vec<(String, String)> {
    let out = Command::new("ssh")
        .args(["-G", "-F"])
        .arg(file)
        .arg(alias)
        .output()
        .expect("ssh -G runs");
    assert!(
        out.status.success(),
        "ssh -G: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn values(g: &[(String, String)], key: &str) -> Vec<String> {
    g.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

#[test]
fn reads_a_config_as_openssh_does() {
    // Both read the process's HOME (`~` paths); the files themselves live
    // in a directory of the test's own, included by absolute path.
    let home = std::env::var("HOME").expect("HOME is set");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config.d")).unwrap();
    std::fs::write(
        dir.path().join("config.d/lab.conf"),
        "Host lab-*\n  User labuser\n  Port 2200\n",
    )
    .unwrap();
    let file = dir.path().join("config");
    std::fs::write(
        &file,
        format!(
            "Include {}/config.d/*.conf\n\
             Host hv? !hv9\n\
             \tHostName %h.lab.example\n\
             \tUser root\n\
             \tIdentityFile ~/.ssh/hv_%r_%p\n\
             \tProxyJump ops@bastion:2022,jump2\n\
             Host hv1\n\
             \tPort 2222\n\
             \tUser ignored\n\
             Host bastion\n\
             \tHostName=203.0.113.7\n\
             Host *\n\
             \tUser fallback\n\
             \tIdentityFile ~/.ssh/global\n\
             \tUserKnownHostsFile ~/.ssh/kh1 \"/etc/ssh/kh 2\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let config = UserConfig::load(&file).unwrap();
    for alias in ["hv1", "hv2", "hv9", "lab-3", "bastion", "other"] {
        let g = ssh_g(&file, alias);
        let h = config.host(alias).unwrap();
        let one = |k: &str| values(&g, k).into_iter().next().unwrap_or_default();
        assert_eq!(h.host_name, one("hostname"), "{alias}: hostname");
        assert_eq!(h.user, one("user"), "{alias}: user");
        assert_eq!(h.port.to_string(), one("port"), "{alias}: port");
        let jumps = one("proxyjump");
        assert_eq!(
            h.proxy_jump.join(","),
            if jumps == "none" {
                String::new()
            } else {
                jumps
            },
            "{alias}: proxyjump"
        );
        // `ssh -G` prints identity files as written (`~` and tokens
        // expanded when they are loaded): expand the two this config uses.
        let theirs: Vec<String> = values(&g, "identityfile")
            .into_iter()
            .map(|f| {
                f.replacen('~', &home, 1)
                    .replace("%r", &one("user"))
                    .replace("%p", &one("port"))
            })
            .collect();
        let ours: Vec<String> = h
            .identity_files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        assert_eq!(ours, theirs, "{alias}: identityfile");
        let ours: Vec<String> = h
            .known_hosts_files
            .iter()
            .map(|f| f.display().to_string())
            .collect();
        // Printed space-separated; the test's one file with a space in it
        // is put back together.
        let theirs = one("userknownhostsfile").replace("kh 2", "kh\u{0}2");
        let theirs: Vec<String> = theirs.split(' ').map(|f| f.replace('\u{0}', " ")).collect();
        assert_eq!(ours, theirs, "{alias}: userknownhostsfile");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_alias_reaches_a_host_behind_its_bastion() {
    let server = UnixServer::echo();
    let target = OwnSshd::start("");
    let bastion = OwnSshd::start("");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config");
    let config = target.ssh_config_block("hv1", &["ProxyJump jump".to_owned()])
        + &bastion.ssh_config_block("jump", &[]);
    std::fs::write(&file, config).unwrap();
    let config = UserConfig::load(&file)
        .unwrap()
        .ssh_config("hv1", server.path.to_str().unwrap())
        .unwrap();
    assert_eq!(config.jumps.len(), 1);
    let mut socket = tokio::time::timeout(Duration::from_secs(30), ssh_socket::dial(&config))
        .await
        .expect("dial within 30 s")
        .expect("through the config's bastion");
    socket.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    socket.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
}

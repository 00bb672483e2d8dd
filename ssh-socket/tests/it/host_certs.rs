//! Host certificates (`@cert-authority`): sshd instances of the test's own
//! serving a host certificate signed with ssh-keygen by a CA of the test's
//! own, checked as OpenSSH checks them.

use std::path::{Path, PathBuf};

use ssh_socket::{Error, HostKeyPolicy};
use testkit::sshd::{OwnSshd, new_key, public_key};

use crate::support::{UnixServer, own_config};

/// A known_hosts file of `lines` in `dir`.
fn known_hosts(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// Dials `sshd` with `known_hosts`.
async fn dial(sshd: &OwnSshd, server: &UnixServer, known_hosts: &Path) -> Result<(), Error> {
    let mut config = own_config(sshd, &server.path);
    config.host_keys = HostKeyPolicy::KnownHosts(known_hosts.to_owned());
    ssh_socket::dial(&config).await.map(drop)
}

fn rejected(result: Result<(), Error>, why: &str) {
    match result {
        Err(e @ Error::HostCertificateRejected { .. }) => {
            assert!(e.is_permanent() && e.is_host_key(), "{e}");
            assert!(e.to_string().contains(why), "expected {why:?}: {e}");
        }
        other => panic!("expected a rejected certificate ({why}), got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_certified_by_a_listed_authority_dials_and_every_flaw_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = new_key(dir.path(), "ca");
    let other_ca = new_key(dir.path(), "other_ca");
    let server = UnixServer::echo();
    let good = OwnSshd::start_certified("", &ca, "127.0.0.1", "-5m:+1h");
    let authority = |sshd: &OwnSshd, key: &Path| {
        format!(
            "@cert-authority [127.0.0.1]:{} {}",
            sshd.port,
            public_key(key)
        )
    };

    // Only the authority is listed (no plain key): the certificate is
    // what lets the host in; a wildcard pattern works as well.
    let only_ca = known_hosts(dir.path(), "kh-ca", &[authority(&good, &ca)]);
    dial(&good, &server, &only_ca)
        .await
        .expect("a certified host");
    let wildcard = known_hosts(
        dir.path(),
        "kh-wild",
        &[format!("@cert-authority * {}", public_key(&ca))],
    );
    dial(&good, &server, &wildcard)
        .await
        .expect("a certified host, any name");

    // Signed by an authority not listed for it.
    let other = known_hosts(dir.path(), "kh-other", &[authority(&good, &other_ca)]);
    rejected(
        dial(&good, &server, &other).await,
        "not signed by an authority",
    );

    // The authority revoked, or the host's own key.
    let revoked_ca = known_hosts(
        dir.path(),
        "kh-revoked-ca",
        &[
            authority(&good, &ca),
            format!("@revoked * {}", public_key(&ca)),
        ],
    );
    rejected(
        dial(&good, &server, &revoked_ca).await,
        "authority's key is @revoked",
    );
    let revoked_host = known_hosts(
        dir.path(),
        "kh-revoked-host",
        &[
            authority(&good, &ca),
            format!("@revoked [127.0.0.1]:{} {}", good.port, good.host_pub),
        ],
    );
    rejected(
        dial(&good, &server, &revoked_host).await,
        "host's key is @revoked",
    );

    // For another name; expired; not valid yet.
    let elsewhere = OwnSshd::start_certified("", &ca, "db-1.example.org", "-5m:+1h");
    let kh = known_hosts(dir.path(), "kh-else", &[authority(&elsewhere, &ca)]);
    rejected(
        dial(&elsewhere, &server, &kh).await,
        "db-1.example.org only, not 127.0.0.1",
    );
    let expired = OwnSshd::start_certified("", &ca, "127.0.0.1", "20200101:20200102");
    let kh = known_hosts(dir.path(), "kh-expired", &[authority(&expired, &ca)]);
    rejected(dial(&expired, &server, &kh).await, "expired");
    let early = OwnSshd::start_certified("", &ca, "127.0.0.1", "+1d:+2d");
    let kh = known_hosts(dir.path(), "kh-early", &[authority(&early, &ca)]);
    rejected(dial(&early, &server, &kh).await, "not valid yet");

    // A host the authority is listed for but that has no certificate.
    let plain = OwnSshd::start("");
    let kh = known_hosts(dir.path(), "kh-plain", &[authority(&plain, &ca)]);
    let err = dial(&plain, &server, &kh).await.unwrap_err();
    assert!(
        matches!(err, Error::HostKeyNotCertified { line: 1, .. }),
        "{err:?}"
    );
}

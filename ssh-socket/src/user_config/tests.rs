use super::*;

fn env(home: &Path) -> Env {
    Env {
        home: Some(home.to_owned()),
        user: Some("me".into()),
        agent: None,
    }
}

fn config(text: &str) -> UserConfig {
    UserConfig::parse_with(text, Path::new("cfg"), env(Path::new("/home/me"))).unwrap()
}

fn error(text: &str) -> (usize, String) {
    match UserConfig::parse_with(text, Path::new("cfg"), env(Path::new("/home/me")))
        .and_then(|c| c.ssh_config("hv1", "/s"))
    {
        Err(Error::UserConfig { line, reason, .. }) => (line, reason),
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn the_first_value_wins_and_identity_files_add_up() {
    let c = config(
        "# global\n\
         IdentityFile ~/.ssh/global\n\
         Host hv*  !hv9\n\
         \tHostName %h.lab.example\n\
         \tUser root\n\
         \tIdentityFile ~/.ssh/hv_%r@%h:%p\n\
         Host hv1\n\
         \tUser ignored\n\
         \tPort 2222\n\
         Host *\n\
         \tPort 22\n\
         \tUserKnownHostsFile ~/.ssh/kh \"/etc/ssh/with space\"\n",
    );
    let h = c.host("HV1").unwrap();
    assert_eq!(h.host_name, "HV1.lab.example");
    assert_eq!(h.user, "root");
    assert_eq!(h.port, 2222);
    assert_eq!(
        h.identity_files,
        [
            PathBuf::from("/home/me/.ssh/global"),
            PathBuf::from("/home/me/.ssh/hv_root@HV1.lab.example:2222"),
        ]
    );
    assert_eq!(
        h.known_hosts_files,
        [
            PathBuf::from("/home/me/.ssh/kh"),
            PathBuf::from("/etc/ssh/with space")
        ]
    );
    // Negated: only the global and `Host *` lines apply; OpenSSH's defaults.
    let h = c.host("hv9").unwrap();
    assert_eq!(
        (h.host_name.as_str(), h.user.as_str(), h.port),
        ("hv9", "me", 22)
    );
    let h = config("").host("x").unwrap();
    assert_eq!(
        h.known_hosts_files,
        [
            PathBuf::from("/home/me/.ssh/known_hosts"),
            PathBuf::from("/home/me/.ssh/known_hosts2")
        ]
    );
    assert!(h.proxy_jump.is_empty() && h.identity_files.is_empty());
}

#[test]
fn keyword_forms_tokens_and_match_blocks() {
    let c = config(
        "Host=a\n  HostName=10.0.0.1\n  USER = %u-admin\n  IdentityFile %d/k%%\n\
         Match host a\n  Port 1\n\
         Match all\n  Port 2200\n",
    );
    let h = c.host("a").unwrap();
    assert_eq!(h.host_name, "10.0.0.1");
    // `User` takes no tokens in OpenSSH: kept as written.
    assert_eq!(h.user, "%u-admin");
    assert_eq!(h.identity_files, [PathBuf::from("/home/me/k%")]);
    // `Match host` is not evaluated; `Match all` applies.
    assert_eq!(h.port, 2200);
}

#[test]
fn the_dial_takes_keys_known_hosts_and_jumps_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let kh = dir.path().join("kh2");
    std::fs::write(&kh, "").unwrap();
    let text = format!(
        "Host hv1\n  HostName 10.0.0.11\n  User root\n  ProxyJump j1,ops@j2:2022\n\
           UserKnownHostsFile {missing} {kh}\n\
         Host j1\n  HostName bastion.example\n  Port 2201\n  IdentityFile ~/.ssh/j1\n\
           ProxyJump ignored-for-hops\n\
         Host j2\n  User nobody\n  IdentityAgent /run/agent.sock\n",
        missing = dir.path().join("absent").display(),
        kh = kh.display()
    );
    let c = UserConfig::parse_with(&text, Path::new("cfg"), env(dir.path())).unwrap();
    let s = c
        .ssh_config("hv1", "/var/run/libvirt/libvirt-sock")
        .unwrap();
    assert_eq!(
        (s.host.as_str(), s.user.as_str(), s.port),
        ("10.0.0.11", "root", 22)
    );
    assert_eq!(s.remote_socket, "/var/run/libvirt/libvirt-sock");
    // The first known_hosts file that exists.
    assert_eq!(s.host_keys, HostKeyPolicy::KnownHosts(kh.clone()));
    // No IdentityFile, no agent: OpenSSH's default files in turn.
    assert!(
        matches!(&s.key, KeySource::Files(f) if f.len() == 3 && f[2].ends_with(".ssh/id_ed25519")),
        "{:?}",
        s.key
    );
    assert_eq!(s.jumps.len(), 2);
    let (j1, j2) = (&s.jumps[0], &s.jumps[1]);
    assert_eq!(
        (j1.host.as_str(), j1.port, j1.user.as_str()),
        ("bastion.example", 2201, "me")
    );
    assert!(matches!(&j1.key, KeySource::Files(f) if f == &[dir.path().join(".ssh/j1")]));
    // The hop's own user and port win over its config's.
    assert_eq!(
        (j2.host.as_str(), j2.port, j2.user.as_str()),
        ("j2", 2022, "ops")
    );
    assert!(matches!(&j2.key, KeySource::Agent(p) if p == Path::new("/run/agent.sock")));
}

#[test]
fn includes_are_read_in_place_under_their_host() {
    let home = tempfile::tempdir().unwrap();
    let d = home.path().join(".ssh/config.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("10-lab"), "Host lab1\n  User lab\n").unwrap();
    std::fs::write(d.join("20-more"), "Port 2022\n").unwrap();
    std::fs::write(d.join(".hidden"), "User hidden\n").unwrap();
    std::fs::write(home.path().join("scoped"), "User scoped\n").unwrap();
    let text = format!(
        "Include config.d/*\nHost only\n  Include {}\n  Include absent-file\nHost *\n  User last\n",
        home.path().join("scoped").display()
    );
    let c = UserConfig::parse_with(&text, Path::new("cfg"), env(home.path())).unwrap();
    // Each included file starts from the including line's conditions: the
    // second file's `Port` is not under the first file's `Host lab1`, so
    // it applies to every host (`ssh -G` agrees).
    let lab = c.host("lab1").unwrap();
    assert_eq!((lab.user.as_str(), lab.port), ("lab", 2022));
    assert_eq!(c.host("other").unwrap().port, 2022);
    assert_eq!(c.host("only").unwrap().user, "scoped");
    assert_eq!(c.host("other").unwrap().user, "last");
}

#[test]
fn what_cannot_be_used_is_an_error_naming_the_line() {
    assert_eq!(error("Host hv1\n  Port twenty\n").0, 2);
    assert!(error("Host hv1\n  Port 0\n").1.contains("not a port"));
    let (line, reason) = error("\nHost hv1\n  ProxyCommand nc %h %p\n");
    assert_eq!(line, 3);
    assert!(reason.contains("ProxyJump"), "{reason}");
    assert!(error("Host hv1\n  IdentityFile ~/%C\n").1.contains("%C"));
    assert!(
        error("Host hv1\n  IdentityFile ~bob/k\n")
            .1
            .contains("~user")
    );
    assert_eq!(error("Host hv1\n  User \"root\n").0, 2);
    assert_eq!(error("Host\n").0, 1);
    assert!(
        error("Host hv1\n  ProxyJump a@\n")
            .1
            .contains("ProxyJump hop")
    );
    // A `ProxyCommand none` is no command.
    config("Host hv1\n  ProxyCommand none\n")
        .ssh_config("hv1", "/s")
        .unwrap();
    let e = error("Host hv1\n  Port x\n");
    assert!(e.1.contains("\"x\""), "{e:?}");
}

#[test]
fn the_error_says_file_and_line_and_is_permanent() {
    let e = UserConfig::parse_with("Host a\n  Port x\n", Path::new("/c"), env(Path::new("/h")))
        .and_then(|c| c.host("a"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ssh config /c line 2: Port \"x\" is not a port"
    );
    assert!(e.is_permanent());
    assert_eq!(e.stage(), crate::Stage::Files);
    let e = UserConfig::load("/nonexistent/ssh_config").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("ssh config /nonexistent/ssh_config: "),
        "{e}"
    );
    // Not about a line of a file: no empty file name.
    let e = UserConfig::parse_with("", Path::new("/c"), Env::default())
        .and_then(|c| c.host("a"))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "ssh config: no User for a and USER/LOGNAME are not set"
    );
}

#[test]
fn a_login_given_wins_over_user_and_needs_no_local_user() {
    let c = UserConfig::parse_with(
        "Host hv1\n  User root\n  IdentityFile ~/.ssh/%r\n  ProxyJump ops@j\n",
        Path::new("cfg"),
        Env {
            home: Some("/h".into()),
            ..Env::default()
        },
    )
    .unwrap();
    let s = c.ssh_config_as("hv1", Some("admin"), "/s").unwrap();
    assert_eq!(s.user, "admin");
    assert!(matches!(&s.key, KeySource::Files(f) if f == &[PathBuf::from("/h/.ssh/admin")]));
    // The hop's user comes from the hop: no local user needed.
    assert_eq!(s.jumps[0].user, "ops");
}

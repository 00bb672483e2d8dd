use std::ffi::OsString;

use super::*;
use crate::uri::Uri;

/// A machine with these variables and existing files.
struct Machine {
    vars: &'static [(&'static str, &'static str)],
    files: &'static [&'static str],
}

impl Host for Machine {
    fn is_root(&self) -> bool {
        false
    }
    fn var(&self, name: &str) -> Option<OsString> {
        self.vars
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.into())
    }
    fn exists(&self, path: &Path) -> bool {
        self.files.iter().any(|f| Path::new(f) == path)
    }
}

fn login(uri: &str, machine: &Machine) -> Result<SshLogin> {
    SshRoute::for_uri(&Uri::parse(uri).unwrap())
        .unwrap()
        .login(machine, false)
}

const HOME: (&str, &str) = ("HOME", "/home/me");

#[test]
fn the_uri_wins_over_the_environment() {
    let m = Machine {
        vars: &[HOME, ("USER", "me"), ("SSH_AUTH_SOCK", "/run/agent")],
        files: &["/home/me/.ssh/id_ed25519"],
    };
    let l = login("qemu+ssh://root@h/system?keyfile=/k&known_hosts=/kh", &m).unwrap();
    assert_eq!(
        l,
        SshLogin {
            user: "root".into(),
            key: Some(LoginKey::File("/k".into())),
            known_hosts: "/kh".into(),
        }
    );
}

#[test]
fn without_a_keyfile_the_agent_comes_first_then_the_default_keys() {
    let with_agent = Machine {
        vars: &[HOME, ("USER", "me"), ("SSH_AUTH_SOCK", "/run/agent")],
        files: &["/home/me/.ssh/id_rsa"],
    };
    let l = login("qemu+ssh://h/system", &with_agent).unwrap();
    assert_eq!(l.user, "me");
    assert_eq!(l.key, Some(LoginKey::Agent("/run/agent".into())));
    assert_eq!(l.known_hosts, PathBuf::from("/home/me/.ssh/known_hosts"));
    // sshauth=privkey skips the agent.
    let l = login("qemu+ssh://h/system?sshauth=privkey", &with_agent).unwrap();
    assert_eq!(
        l.key,
        Some(LoginKey::Files(vec!["/home/me/.ssh/id_rsa".into()]))
    );
    // No agent: the default keys that exist, in OpenSSH's order.
    let no_agent = Machine {
        vars: &[HOME, ("LOGNAME", "me2")],
        files: &["/home/me/.ssh/id_ed25519", "/home/me/.ssh/id_rsa"],
    };
    let l = login("qemu+ssh://h/system", &no_agent).unwrap();
    assert_eq!(l.user, "me2");
    assert_eq!(
        l.key,
        Some(LoginKey::Files(vec![
            "/home/me/.ssh/id_rsa".into(),
            "/home/me/.ssh/id_ed25519".into()
        ]))
    );
}

#[test]
fn what_is_missing_is_named() {
    let empty = Machine {
        vars: &[HOME],
        files: &[],
    };
    let e = login("qemu+ssh://h/system", &empty).unwrap_err();
    assert!(e.to_string().contains("USER"), "{e}");
    let e = login("qemu+ssh://root@h/system", &empty).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::SshSetup { .. }), "{e:?}");
    assert!(
        text.contains("SSH_AUTH_SOCK") && text.contains("id_ed25519"),
        "{text}"
    );
    assert!(!e.is_transient());
    let no_home = Machine {
        vars: &[],
        files: &[],
    };
    let e = login("qemu+ssh://root@h/system?keyfile=/k", &no_home).unwrap_err();
    assert!(e.to_string().contains("known_hosts="), "{e}");
    // A caller's own key needs no key on the machine.
    let l = SshRoute::for_uri(&Uri::parse("qemu+ssh://root@h/system").unwrap())
        .unwrap()
        .login(&empty, true)
        .unwrap();
    assert_eq!(l.key, None);
}

#[test]
fn the_config_carries_the_route_the_socket_and_the_options() {
    let route = SshRoute::for_uri(
        &Uri::parse("qemu+ssh://root@h:2200/system?keyfile=/k&known_hosts=/kh").unwrap(),
    )
    .unwrap();
    let jump = ssh_socket::JumpHost::new(
        "bastion",
        "j",
        "/jk",
        HostKeyPolicy::KnownHosts("/kh".into()),
    );
    let options = ConnectOptions::new()
        .config(crate::Config::default().call_timeout(std::time::Duration::from_secs(7)))
        .ssh_jump(jump);
    let c = ssh_config(&route, Path::new("/run/l.sock"), &options).unwrap();
    assert_eq!(
        (c.host.as_str(), c.port, c.user.as_str()),
        ("h", 2200, "root")
    );
    assert_eq!(c.remote_socket, "/run/l.sock");
    assert_eq!(c.connect_timeout, std::time::Duration::from_secs(7));
    assert_eq!(c.host_keys, HostKeyPolicy::KnownHosts("/kh".into()));
    assert!(matches!(&c.key, KeySource::File(p) if p == Path::new("/k")));
    assert_eq!(c.jumps.len(), 1);
    // The options' key wins over the URI's.
    let options = ConnectOptions::new().ssh_key(KeySource::Agent("/a".into()));
    let c = ssh_config(&route, Path::new("/s"), &options).unwrap();
    assert!(matches!(&c.key, KeySource::Agent(p) if p == Path::new("/a")));
}

#[test]
fn a_user_config_reads_the_host_as_an_alias_and_the_uri_wins() {
    let user_config = ssh_socket::UserConfig::parse(
        "Host hv1\n  HostName 10.0.0.1\n  User root\n  Port 2200\n  IdentityFile /k\n\
           UserKnownHostsFile /kh1\n  ProxyJump ops@j\n",
    )
    .unwrap();
    let options = ConnectOptions::new().ssh_user_config(user_config);
    let config = |uri: &str| {
        let route = SshRoute::for_uri(&Uri::parse(uri).unwrap()).unwrap();
        ssh_config(&route, Path::new("/s"), &options).unwrap()
    };
    let c = config("qemu+ssh://hv1/system");
    assert_eq!(
        (c.host.as_str(), c.user.as_str(), c.port),
        ("10.0.0.1", "root", 2200)
    );
    assert!(matches!(&c.key, KeySource::Files(f) if f == &[PathBuf::from("/k")]));
    assert_eq!(c.host_keys, HostKeyPolicy::KnownHosts("/kh1".into()));
    assert_eq!(c.jumps.len(), 1);
    assert_eq!(c.jumps[0].user, "ops");
    // What the URI names explicitly wins, as `ssh -l -p -i` would.
    let c = config("qemu+ssh://admin@hv1:22/system?keyfile=/k2&known_hosts=/kh2");
    assert_eq!(
        (c.host.as_str(), c.user.as_str(), c.port),
        ("10.0.0.1", "admin", 22)
    );
    assert!(matches!(&c.key, KeySource::File(f) if f == Path::new("/k2")));
    assert_eq!(c.host_keys, HostKeyPolicy::KnownHosts("/kh2".into()));
}

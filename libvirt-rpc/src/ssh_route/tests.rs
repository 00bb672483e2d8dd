use super::*;

fn route(text: &str) -> Result<SshRoute> {
    SshRoute::for_uri(&Uri::parse(text).unwrap())
}

fn refused(text: &str) -> &'static str {
    match route(text) {
        Err(Error::UnsupportedParameter { name, .. }) => name,
        other => panic!("{text}: {other:?}"),
    }
}

#[test]
fn the_uri_gives_host_port_user_and_files() {
    let r = route("qemu+ssh://root@h.example:2222/system?keyfile=/k&known_hosts=/kh").unwrap();
    assert_eq!(r.host, "h.example");
    assert_eq!(r.port, 2222);
    assert_eq!(r.user.as_deref(), Some("root"));
    assert_eq!(r.auth, [AuthMethod::Key(Some("/k".into()))]);
    assert_eq!(r.known_hosts, Some("/kh".into()));
    // libvirt's defaults: port 22, this host, the agent then default keys.
    let r = route("qemu+libssh:///system").unwrap();
    assert_eq!((r.host.as_str(), r.port, r.user), ("localhost", 22, None));
    assert_eq!(r.auth, [AuthMethod::Agent, AuthMethod::Key(None)]);
    assert_eq!(route("qemu+libssh2://[::1]/system").unwrap().host, "::1");
}

#[test]
fn sshauth_orders_the_methods_and_skips_the_ones_not_implemented() {
    let r = route("qemu+ssh://h/system?sshauth=privkey,agent&keyfile=/k").unwrap();
    assert_eq!(
        r.auth,
        [AuthMethod::Key(Some("/k".into())), AuthMethod::Agent]
    );
    let r = route("qemu+libssh://h/system?sshauth=password,agent").unwrap();
    assert_eq!(r.auth, [AuthMethod::Agent]);
    assert_eq!(
        refused("qemu+libssh://h/system?sshauth=password,keyboard-interactive"),
        "sshauth"
    );
}

#[test]
fn parameters_asking_for_a_remote_command_or_no_host_key_check_are_refused() {
    assert_eq!(refused("qemu+ssh://h/system?command=/bin/ssh"), "command");
    assert_eq!(refused("qemu+ssh://h/system?netcat=/bin/nc"), "netcat");
    assert_eq!(refused("qemu+ssh://h/system?proxy=netcat"), "proxy");
    assert_eq!(
        refused("qemu+libssh://h/system?known_hosts_verify=ignore"),
        "known_hosts_verify"
    );
    assert_eq!(
        refused("qemu+libssh://h/system?known_hosts_verify=auto"),
        "known_hosts_verify"
    );
    // What changes nothing here is accepted.
    for ok in [
        "qemu+ssh://h/system?proxy=auto",
        "qemu+ssh://h/system?known_hosts_verify=normal",
        "qemu+ssh://h/system?no_tty=1",
    ] {
        route(ok).unwrap();
    }
}

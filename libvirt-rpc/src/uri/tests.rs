use std::collections::HashSet;

use proptest::prelude::*;

use super::*;

fn uri(s: &str) -> Uri {
    Uri::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
}

fn err(s: &str) -> UriError {
    match Uri::parse(s) {
        Ok(u) => panic!("{s} parsed as {u:?}"),
        Err(e) => e,
    }
}

/// A host with the given sockets, as root or not.
struct FakeHost {
    root: bool,
    runtime_dir: Option<PathBuf>,
    sockets: HashSet<PathBuf>,
}

impl FakeHost {
    fn new(root: bool, sockets: &[&str]) -> Self {
        Self {
            root,
            runtime_dir: Some(PathBuf::from("/run/user/1000/libvirt")),
            sockets: sockets.iter().map(PathBuf::from).collect(),
        }
    }
}

impl Host for FakeHost {
    fn is_root(&self) -> bool {
        self.root
    }
    fn var(&self, _: &str) -> Option<std::ffi::OsString> {
        None
    }
    fn runtime_dir(&self) -> Option<PathBuf> {
        self.runtime_dir.clone()
    }
    fn exists(&self, path: &Path) -> bool {
        self.sockets.contains(path)
    }
}

fn local(s: &str, flags: OpenFlags, host: &FakeHost) -> Result<PathBuf, UriError> {
    uri(s).resolve_local(flags, host)
}

const MODULAR: &[&str] = &[
    "/var/run/libvirt/virtqemud-sock",
    "/var/run/libvirt/virtqemud-sock-ro",
    "/var/run/libvirt/libvirt-sock",
];
const MONOLITHIC: &[&str] = &[
    "/var/run/libvirt/libvirt-sock",
    "/var/run/libvirt/libvirt-sock-ro",
];

#[test]
fn local_system_uri() {
    let u = uri("qemu:///system");
    assert_eq!(u.driver(), "qemu");
    assert_eq!(u.transport(), Transport::Unix);
    assert_eq!((u.user(), u.host(), u.port()), (None, None, None));
    assert_eq!(u.path(), "/system");
    assert!(!u.is_session());
    assert_eq!(u.name(), "qemu:///system");
    assert_eq!(u.to_string(), "qemu:///system");
}

#[test]
fn session_and_test_uris() {
    let u = uri("qemu:///session");
    assert!(u.is_session());
    assert_eq!(u.name(), "qemu:///session");
    let t = uri("test:///default");
    assert_eq!((t.driver(), t.path()), ("test", "/default"));
    assert_eq!(t.transport(), Transport::Unix);
    assert_eq!(t.name(), "test:///default");
}

#[test]
fn ssh_uri_with_user_port_and_client_params() {
    let u = uri(
        "qemu+ssh://root@host.example:2222/system?keyfile=/keys/id%20ed25519&socket=/var/run/libvirt/libvirt-sock&no_verify=1",
    );
    assert_eq!(u.transport(), Transport::Ssh);
    assert_eq!(u.user(), Some("root"));
    assert_eq!(u.host(), Some("host.example"));
    assert_eq!(u.port(), Some(2222));
    assert_eq!(u.keyfile(), Some(Path::new("/keys/id ed25519")));
    assert_eq!(u.socket(), Some(Path::new("/var/run/libvirt/libvirt-sock")));
    // Everything the client consumes is stripped from the name.
    assert_eq!(u.name(), "qemu:///system");
    assert_eq!(
        u.remote_socket(OpenFlags::empty()),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock"))
    );
}

#[test]
fn tcp_tls_and_default_ports() {
    let tcp = uri("qemu+tcp://host/system");
    assert_eq!(tcp.transport(), Transport::Tcp);
    assert_eq!((tcp.port(), tcp.port_or_default()), (None, Some(16509)));
    let tls = uri("qemu+tls://host/system");
    assert_eq!(tls.transport(), Transport::Tls);
    assert_eq!(tls.port_or_default(), Some(16514));
    // A host without a transport means TLS, as in libvirt.
    assert_eq!(uri("qemu://host/system").transport(), Transport::Tls);
    assert_eq!(uri("qemu+ssh://host/system").port_or_default(), Some(22));
    assert_eq!(uri("qemu:///system").port_or_default(), None);
    for remote in [tcp, tls] {
        assert_eq!(
            remote.daemon_socket(OpenFlags::empty()),
            Err(UriError::NoSocketForTransport {
                transport: remote.transport()
            })
        );
        assert!(remote.remote_socket(OpenFlags::empty()).is_err());
    }
}

#[test]
fn transport_names_are_case_insensitive() {
    assert_eq!(uri("qemu+SSH://h/system").transport(), Transport::Ssh);
    assert_eq!(
        uri("qemu+LibSSH2://h/system").transport(),
        Transport::Libssh2
    );
    assert_eq!(
        uri("qemu+SSH://h/system").to_string(),
        "qemu+ssh://h/system"
    );
}

#[test]
fn ipv6_host_loses_its_brackets() {
    let u = uri("qemu+tcp://[fe80::1]:16510/system");
    assert_eq!((u.host(), u.port()), (Some("fe80::1"), Some(16510)));
    assert_eq!(u.to_string(), "qemu+tcp://[fe80::1]:16510/system");
    assert_eq!(uri("qemu+tcp://[::1]/system").host(), Some("::1"));
}

#[test]
fn params_are_case_insensitive_last_wins_and_passed_on_unless_the_clients() {
    let u = uri("qemu:///system?Socket=/a&socket=/b;extra=x%26y&flag");
    assert_eq!(u.socket(), Some(Path::new("/b")));
    assert_eq!(u.param("EXTRA"), Some("x&y"));
    assert_eq!(u.param("flag"), Some(""));
    assert_eq!(u.name(), "qemu:///system?extra=x%26y&flag=");
    assert_eq!(
        uri("qemu:///system?name=qemu:///embed").name(),
        "qemu:///embed"
    );
    assert_eq!(uri("remote:///").name(), "");
}

#[test]
fn fragment_and_empty_params_are_ignored() {
    let u = uri("qemu:///system?&&a=1&#frag");
    assert_eq!(u.params().collect::<Vec<_>>(), vec![("a", "1")]);
    assert_eq!(u.path(), "/system");
}

#[test]
fn rule_scheme_is_required_and_well_formed() {
    for bad in [
        "",
        "/var/run/libvirt/libvirt-sock",
        "://x",
        "1qemu:///system",
        "qe mu:///system",
        "+ssh://h/system",
        "q_emu:///system",
    ] {
        assert!(
            matches!(
                err(bad),
                UriError::BadScheme { .. } | UriError::BadCharacter { .. }
            ),
            "{bad}: {:?}",
            err(bad)
        );
    }
}

#[test]
fn rule_transport_must_be_known() {
    assert_eq!(
        err("qemu+http://h/system"),
        UriError::UnknownTransport {
            transport: "http".into()
        }
    );
    assert!(matches!(
        err("qemu+://h/system"),
        UriError::UnknownTransport { .. }
    ));
}

#[test]
fn rule_unix_cannot_name_a_host() {
    assert_eq!(
        err("qemu+unix://host/system"),
        UriError::UnixWithHost {
            host: "host".into()
        }
    );
}

#[test]
fn rule_port_is_a_16_bit_number() {
    for bad in ["65536", "-1", "+22", "x", "22a"] {
        assert_eq!(
            err(&format!("qemu+ssh://h:{bad}/system")),
            UriError::BadPort { port: bad.into() },
            "{bad}"
        );
    }
    assert_eq!(uri("qemu+ssh://h:/system").port(), None);
    assert_eq!(uri("qemu+ssh://h:65535/system").port(), Some(65535));
}

#[test]
fn rule_ipv6_brackets_close() {
    assert_eq!(err("qemu+tcp://[::1/system"), UriError::BadHost);
    assert_eq!(err("qemu+tcp://[::1]x/system"), UriError::BadHost);
}

#[test]
fn rule_escapes_are_complete_hex_and_utf8() {
    for bad in [
        "qemu:///sys%",
        "qemu:///sys%4",
        "qemu:///sys%zz",
        "qemu:///%ff%fe",
        "qemu:///system?k=%c3",
    ] {
        assert!(matches!(err(bad), UriError::BadEscape { .. }), "{bad}");
    }
    assert_eq!(uri("qemu:///caf%C3%A9").path(), "/café");
}

#[test]
fn rule_whitespace_and_controls_must_be_escaped() {
    assert_eq!(
        err("qemu:///system?keyfile=/a b"),
        UriError::BadCharacter { ch: ' ', at: 25 }
    );
    assert!(matches!(
        err("qemu:///sys\ntem"),
        UriError::BadCharacter { ch: '\n', .. }
    ));
}

#[test]
fn rule_mode_is_auto_legacy_or_direct() {
    assert_eq!(
        err("qemu:///system?mode=fast"),
        UriError::UnknownMode {
            mode: "fast".into()
        }
    );
    assert_eq!(uri("qemu:///system").mode(), Ok(SocketMode::Auto));
    assert_eq!(
        uri("qemu:///system?mode=Direct").mode(),
        Ok(SocketMode::Direct)
    );
}

#[test]
fn modular_host_gets_the_drivers_own_daemon() {
    let host = FakeHost::new(true, MODULAR);
    assert_eq!(
        local("qemu:///system", OpenFlags::empty(), &host),
        Ok(PathBuf::from("/var/run/libvirt/virtqemud-sock"))
    );
    assert_eq!(
        local("qemu:///system", OpenFlags::READ_ONLY, &host),
        Ok(PathBuf::from("/var/run/libvirt/virtqemud-sock-ro"))
    );
    // A driver without a daemon of its own falls back to the proxy's
    // (legacy) socket.
    assert_eq!(
        local("test:///default", OpenFlags::empty(), &host),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock"))
    );
    assert_eq!(
        local("qemu:///system?mode=legacy", OpenFlags::empty(), &host),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock"))
    );
}

#[test]
fn monolithic_host_gets_libvirtd() {
    let host = FakeHost::new(true, MONOLITHIC);
    assert_eq!(
        local("qemu:///system", OpenFlags::empty(), &host),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock"))
    );
    assert_eq!(
        local("qemu:///system", OpenFlags::READ_ONLY, &host),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock-ro"))
    );
    // Asked for explicitly, the direct socket is returned even if absent
    // (connecting then fails with the path in the IO error).
    assert_eq!(
        local("qemu:///system?mode=direct", OpenFlags::empty(), &host),
        Ok(PathBuf::from("/var/run/libvirt/virtqemud-sock"))
    );
}

#[test]
fn no_daemon_names_both_sockets() {
    let host = FakeHost::new(true, &[]);
    assert_eq!(
        local("qemu:///system", OpenFlags::empty(), &host),
        Err(UriError::NoDaemonSocket {
            direct: "/var/run/libvirt/virtqemud-sock".into(),
            legacy: "/var/run/libvirt/libvirt-sock".into(),
        })
    );
}

#[test]
fn session_daemon_is_per_user_unless_root() {
    let user = FakeHost::new(false, &["/run/user/1000/libvirt/virtqemud-sock"]);
    assert_eq!(
        local("qemu:///session", OpenFlags::empty(), &user),
        Ok(PathBuf::from("/run/user/1000/libvirt/virtqemud-sock"))
    );
    // The per-user daemon has no read-only socket.
    assert_eq!(
        local("qemu:///session", OpenFlags::READ_ONLY, &user),
        Ok(PathBuf::from("/run/user/1000/libvirt/virtqemud-sock"))
    );
    let mono_user = FakeHost::new(false, &["/run/user/1000/libvirt/libvirt-sock"]);
    assert_eq!(
        local("qemu:///session", OpenFlags::empty(), &mono_user),
        Ok(PathBuf::from("/run/user/1000/libvirt/libvirt-sock"))
    );
    // `test+unix` goes to the per-user daemon too; plain `test:` does not.
    assert_eq!(
        local("test+unix:///default", OpenFlags::empty(), &mono_user),
        Ok(PathBuf::from("/run/user/1000/libvirt/libvirt-sock"))
    );
    assert!(local("test:///default", OpenFlags::empty(), &mono_user).is_err());
    // Root's session URI is served by the system daemon.
    let root = FakeHost::new(true, MODULAR);
    assert_eq!(
        local("qemu:///session", OpenFlags::empty(), &root),
        Ok(PathBuf::from("/var/run/libvirt/virtqemud-sock"))
    );
    // System URIs from a user go to the system daemon.
    let user_on_modular = FakeHost::new(false, MODULAR);
    assert_eq!(
        local("qemu:///system", OpenFlags::empty(), &user_on_modular),
        Ok(PathBuf::from("/var/run/libvirt/virtqemud-sock"))
    );
}

#[test]
fn session_without_runtime_dir_is_an_error() {
    let mut host = FakeHost::new(false, &[]);
    host.runtime_dir = None;
    assert_eq!(
        local("qemu:///session", OpenFlags::empty(), &host),
        Err(UriError::NoRuntimeDir)
    );
}

#[test]
fn socket_param_wins_everywhere() {
    let host = FakeHost::new(false, &[]);
    for s in [
        "qemu+unix:///system?socket=/tmp/s",
        "qemu:///session?socket=/tmp/s",
        "qemu:///system?socket=/tmp/s&mode=direct",
    ] {
        assert_eq!(
            local(s, OpenFlags::READ_ONLY, &host),
            Ok(PathBuf::from("/tmp/s")),
            "{s}"
        );
    }
}

#[test]
fn remote_socket_rules() {
    let e = OpenFlags::empty();
    assert_eq!(
        uri("qemu+ssh://h/system").remote_socket(OpenFlags::READ_ONLY),
        Ok(PathBuf::from("/var/run/libvirt/libvirt-sock-ro"))
    );
    assert_eq!(
        uri("qemu+ssh://h/system?mode=direct").remote_socket(e),
        Err(UriError::DirectModeNotLocal {
            transport: Transport::Ssh
        })
    );
    assert_eq!(
        uri("qemu+ssh://h/session").remote_socket(e),
        Err(UriError::RemoteSessionNeedsSocket)
    );
    assert_eq!(
        uri("qemu+libssh://h/session?socket=/run/user/1/libvirt/virtqemud-sock").remote_socket(e),
        Ok(PathBuf::from("/run/user/1/libvirt/virtqemud-sock"))
    );
    assert!(
        uri("qemu+ext:///system?command=/bin/x")
            .remote_socket(e)
            .is_err()
    );
}

#[test]
fn relative_path_survives_display() {
    let u = uri("qemu:system");
    assert_eq!((u.host(), u.path()), (None, "system"));
    assert_eq!(uri(&u.to_string()), u);
    assert_eq!(uri("qemu:/system"), uri("qemu:///system"));
}

fn component() -> impl Strategy<Value = String> {
    // Any characters, the URI's delimiters among them.
    prop::string::string_regex("[a-zA-Z0-9 :@/?#&;=%+\\[\\]é\\-._~]{0,12}").unwrap()
}

proptest! {
    #[test]
    fn parsing_never_panics(s in "\\PC{0,60}") {
        let _ = Uri::parse(&s);
    }

    #[test]
    fn parsing_uri_shaped_text_never_panics(
        scheme in "[a-z]{1,5}(\\+[a-zA-Z0-9]{0,7})?",
        rest in "[a-zA-Z0-9 :@/?#&;=%\\[\\]\\-._~]{0,40}",
    ) {
        let _ = Uri::parse(&format!("{scheme}:{rest}"));
    }

    /// Whatever the components hold, `Display` escapes them so that parsing
    /// gives back the same URI.
    #[test]
    fn display_then_parse_round_trips(
        driver in "[a-z][a-z0-9.\\-]{0,6}",
        transport in prop::sample::select(vec!["", "+unix", "+tls", "+tcp", "+ssh", "+libssh", "+libssh2", "+ext"]),
        user in prop::option::of(component()),
        host in prop::option::of(component()),
        port in prop::option::of(any::<u16>()),
        path in component(),
        params in prop::collection::vec((component(), component()), 0..4),
    ) {
        let authority = user.is_some() || host.is_some() || port.is_some();
        let path = if authority || path.is_empty() { format!("/{path}") } else { path };
        let mut u = Uri {
            driver,
            transport: Transport::from_name(transport.trim_start_matches('+')).unwrap_or(Transport::Unix),
            explicit_transport: !transport.is_empty(),
            user,
            host: host.filter(|h| !h.is_empty()),
            port,
            path,
            params: params.into_iter().filter(|(n, _)| !n.eq_ignore_ascii_case("mode")).collect(),
        };
        // Keep the parser's invariants: no transport means TLS with a host
        // and unix without one; unix names no host.
        if !u.explicit_transport {
            u.transport = if u.host.is_some() { Transport::Tls } else { Transport::Unix };
        }
        if u.transport == Transport::Unix {
            u.host = None;
        }
        let text = u.to_string();
        prop_assert_eq!(Uri::parse(&text), Ok(u), "{}", text);
    }
}

#[test]
fn the_system_socket_constant_is_the_read_write_system_socket() {
    assert_eq!(
        Path::new(SYSTEM_SOCKET),
        system_socket("libvirt", OpenFlags::default())
    );
}

use super::*;

fn route(text: &str) -> Result<Route> {
    Route::for_uri(&Uri::parse(text).unwrap())
}

fn tcp(host: &str, port: u16) -> Route {
    Route::Tcp {
        host: host.to_owned(),
        port,
    }
}

fn tls(host: &str, port: u16) -> Route {
    Route::Tls {
        host: host.to_owned(),
        port,
    }
}

#[test]
fn local_uris_go_to_a_unix_socket() {
    for text in [
        "qemu:///system",
        "qemu:///session",
        "test:///default",
        "test+unix:///default",
        "qemu+unix:///system?socket=/tmp/x.sock",
        "lxc:///",
    ] {
        assert_eq!(route(text).unwrap(), Route::Unix, "{text}");
    }
}

#[test]
fn tcp_uris_dial_the_host_and_port() {
    assert_eq!(
        route("test+tcp://10.0.0.1:1234/default").unwrap(),
        tcp("10.0.0.1", 1234)
    );
    assert_eq!(
        route("qemu+tcp://host.example/system").unwrap(),
        tcp("host.example", 16509)
    );
    // No host: this host, as libvirt does.
    assert_eq!(
        route("qemu+tcp:///system").unwrap(),
        tcp("localhost", 16509)
    );
}

#[test]
fn tls_is_explicit_or_implied_by_a_host() {
    assert_eq!(
        route("qemu+tls://host.example/system").unwrap(),
        tls("host.example", 16514)
    );
    assert_eq!(
        route("qemu://host.example:1600/system").unwrap(),
        tls("host.example", 1600)
    );
    assert_eq!(
        route("qemu+tls://[::1]/system?pkipath=/p").unwrap(),
        tls("::1", 16514)
    );
    assert_eq!(
        route("qemu+tls:///system").unwrap(),
        tls("localhost", 16514)
    );
    assert_eq!(
        route("qemu+tls://h/system?no_verify=0").unwrap(),
        tls("h", 16514)
    );
}

#[test]
fn ssh_transports_route_to_ssh() {
    for text in [
        "qemu+ssh://root@h/system",
        "qemu+libssh://root@h/system",
        "qemu+libssh2://root@h/system",
    ] {
        let Route::Ssh(r) = route(text).unwrap() else {
            panic!("{text}")
        };
        assert_eq!((r.host.as_str(), r.port), ("h", 22), "{text}");
    }
    // SASL is refused before the SSH parameters are read.
    assert!(matches!(
        route("qemu+ssh://h/system?auth=sasl"),
        Err(Error::UnsupportedParameter { name: "auth", .. })
    ));
}

#[test]
fn ext_is_unsupported() {
    let e = route("qemu+ext:///system?command=/bin/true").unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnsupportedTransport {
                transport: Transport::Ext,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn sasl_auth_is_unsupported_whatever_the_transport() {
    for text in [
        "qemu+tcp://h/system?auth=sasl",
        "qemu+tls://h/system?auth=sasl.gssapi",
        "qemu:///system?AUTH=SASL.digest-md5",
    ] {
        let e = route(text).unwrap_err();
        assert!(
            matches!(e, Error::UnsupportedParameter { name: "auth", .. }),
            "{text}: {e:?}"
        );
        assert!(e.to_string().contains("SASL"), "{e}");
    }
    // Other auth values do not stop the connect (the daemon's offer
    // decides, as without the parameter).
    assert_eq!(route("qemu:///system?auth=polkit").unwrap(), Route::Unix);
}

#[test]
fn tls_without_verification_is_refused() {
    let e = route("qemu+tls://h/system?no_verify=1").unwrap_err();
    assert!(
        matches!(
            e,
            Error::UnsupportedParameter {
                name: "no_verify",
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn unsupported_routes_fail_before_any_io() {
    // 192.0.2.1 (TEST-NET-1) would not answer: these fail at once.
    for (text, refused) in [
        ("qemu+ext:///system?command=/bin/true", None),
        (
            "qemu+ssh://root@192.0.2.1/system?command=/bin/ssh",
            Some("command"),
        ),
        ("qemu+ssh://root@192.0.2.1/system?mode=direct", None),
    ] {
        let uri = Uri::parse(text).unwrap();
        let e = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            Client::connect_uri(&uri, &ConnectOptions::new()),
        )
        .await
        .unwrap_or_else(|_| panic!("{text} dialled"))
        .unwrap_err();
        match (refused, &e) {
            (Some(name), Error::UnsupportedParameter { name: n, .. }) => assert_eq!(*n, name),
            (None, Error::UnsupportedTransport { .. } | Error::Uri(_)) => {}
            _ => panic!("{text}: {e:?}"),
        }
        assert!(!e.is_transient(), "{text}: {e:?}");
    }
}

#[tokio::test]
async fn a_socket_parameter_naming_nothing_is_a_lasting_error_naming_it() {
    let uri = Uri::parse("test+unix:///default?socket=/nonexistent/lvrpc.sock").unwrap();
    let e = Client::connect_uri(&uri, &ConnectOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::LocalSocket {
                problem: crate::SocketProblem::Missing,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.is_transient());
    assert!(e.to_string().contains("/nonexistent/lvrpc.sock"), "{e}");
}

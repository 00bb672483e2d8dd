//! The vendor data the provider renders is checked by the real tools that
//! will read it: cloud-init's own schema validator and Squid's own parser
//! (both installed on the host by `cargo xtask setup`). The same checks run
//! inside a booted guest in `guest_e2e_sandbox.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use kvm2_provider::__internals::definition::vendor_data::{
    PasswordLine, ProxyCredentials, ProxySettings, SQUID_CONFIG_PATH, render,
};
use provider_api::config::Cidr;

fn settings() -> ProxySettings {
    ProxySettings::new(
        3128,
        vec![
            Cidr::parse("10.0.0.0/8").unwrap(),
            Cidr::parse("192.168.0.0/16").unwrap(),
            Cidr::parse("fd00::/8").unwrap(),
        ],
    )
}

/// The `content: |` block of the Squid file, unindented.
fn squid_conf(vendor_data: &str) -> String {
    let mut lines = vendor_data
        .lines()
        .skip_while(|l| !l.contains(SQUID_CONFIG_PATH))
        .skip_while(|l| !l.trim_end().ends_with("content: |"))
        .skip(1)
        .take_while(|l| l.starts_with("      "))
        .map(|l| &l[6..])
        .collect::<Vec<_>>()
        .join("\n");
    lines.push('\n');
    lines
}

#[test]
fn cloud_init_schema_accepts_the_vendor_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vendor-data");
    std::fs::write(&path, render(&settings(), None).unwrap()).unwrap();
    let out = Command::new("cloud-init")
        .args(["schema", "-c"])
        .arg(&path)
        .output()
        .expect("cloud-init is installed by `cargo xtask setup`");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "cloud-init schema refused it: {text}");
    assert!(text.contains("Valid cloud-config"), "{text}");
}

#[test]
fn cloud_init_schema_is_a_real_check() {
    // The same validator refuses a broken document, so the test above
    // cannot pass by accident.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vendor-data");
    let broken = render(&settings(), None)
        .unwrap()
        .replace("package_update: true", "package_update: sometimes");
    std::fs::write(&path, broken).unwrap();
    let out = Command::new("cloud-init")
        .args(["schema", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn squid_parses_the_rendered_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let conf = squid_conf(&render(&settings(), None).unwrap());
    assert!(conf.starts_with("# Written by egress-proxies"), "{conf}");
    assert!(conf.contains("http_port 3128\n"), "{conf}");
    let path = dir.path().join("squid.conf");
    std::fs::write(&path, &conf).unwrap();
    let out = Command::new("squid")
        .args(["-k", "parse", "-f"])
        .arg(&path)
        .output()
        .expect("squid is installed by `cargo xtask setup`");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "squid -k parse refused it: {text}");
    assert!(!text.contains("ERROR"), "{text}");

    // A directive Squid does not know fails the same parse.
    std::fs::write(&path, format!("{conf}no_such_directive on\n")).unwrap();
    let out = Command::new("squid")
        .args(["-k", "parse", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() || text.contains("ERROR") || text.contains("WARNING"),
        "an unknown directive was not reported: {text}"
    );
}

/// With basic auth: cloud-init's schema takes the password file's entry,
/// Squid parses the auth directives, and the password is only there hashed.
#[test]
fn the_basic_auth_variant_passes_both_tools_and_holds_no_plain_password() {
    let credentials = ProxyCredentials::parse("egress:Pl41n pass:word\n").unwrap();
    let line = PasswordLine::new(&credentials, *b"twelve bytes").unwrap();
    assert!(!format!("{line:?}").contains("$6$"));
    let doc = render(&settings(), Some(&line)).unwrap();
    assert!(
        !doc.contains("Pl41n"),
        "the plain password is in the vendor data"
    );
    assert!(doc.contains(&format!("      {}\n", line.as_str())), "{doc}");
    // Squid's own helper (the one the guest runs) accepts the password and
    // only it: the hash is one the guest's libcrypt verifies.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{}\n", line.as_str())).unwrap();
    for (attempt, expected) in [
        ("egress Pl41n%20pass:word", "OK"),
        ("egress Pl41n%20pass:wrong", "ERR"),
        ("other Pl41n%20pass:word", "ERR"),
    ] {
        let mut helper = Command::new("/usr/lib/squid/basic_ncsa_auth")
            .arg(file.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("squid's basic_ncsa_auth (installed with squid by `cargo xtask setup`)");
        use std::io::Write as _;
        let mut stdin = helper.stdin.take().unwrap();
        writeln!(stdin, "{attempt}").unwrap();
        drop(stdin);
        let out = helper.wait_with_output().unwrap();
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(answer.starts_with(expected), "{attempt:?}: {answer}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vendor-data");
    std::fs::write(&path, &doc).unwrap();
    let out = Command::new("cloud-init")
        .args(["schema", "-c"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cloud-init schema refused it: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let conf = squid_conf(&doc);
    assert!(conf.contains("http_access deny !authenticated\n"), "{conf}");
    let path = dir.path().join("squid.conf");
    std::fs::write(&path, &conf).unwrap();
    let out = Command::new("squid")
        .args(["-k", "parse", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "squid -k parse refused it: {text}");
    assert!(!text.contains("ERROR"), "{text}");
}

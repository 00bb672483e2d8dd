#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Seed ISOs read back with `isoinfo` (genisoimage) and `blkid`: volume id,
//! file names in the Joliet and Rock Ridge trees, byte-exact contents.

use std::path::Path;
use std::process::Command;

use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::seed_iso::{DEFAULT_SIZE_LIMIT, SeedSpec, build};
use kvm2_provider::__internals::definition::vendor_data::{ProxySettings, render};
use provider_api::config::Cidr;
use provider_api::{Identifier, SecretString};

fn run(program: &str, args: &[&str], iso: &Path) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .arg(iso)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn isoinfo(args: &[&str], iso: &Path) -> Vec<u8> {
    let mut all = args.to_vec();
    all.push("-i");
    run("isoinfo", &all, iso)
}

#[test]
fn isoinfo_reads_label_names_and_exact_contents() {
    let name = Identifier::parse("ep-0123456789abcdef").unwrap();
    let host = Identifier::parse("proxy-a").unwrap();
    // Multi-line, non-ASCII, YAML- and XML-ish metacharacters, CRLF.
    let user_data = SecretString::new(
        "#cloud-config\r\nusers:\n  - name: \"ö'<&>\"\n    ssh_authorized_keys: [\"ssh-ed25519 AAAA\"]\n",
    );
    let vendor = render(
        &ProxySettings::new(3128, vec![Cidr::parse("10.0.0.0/8").unwrap()]),
        None,
    )
    .unwrap();
    let spec = SeedSpec {
        instance_id: &name,
        hostname: &host,
        user_data: Some(&user_data),
        vendor_data: &vendor,
        time: Timestamp::parse("2026-12-02T09:15:16Z").unwrap(),
        size_limit: DEFAULT_SIZE_LIMIT,
    };
    let image = build(&spec).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("seed.iso");
    std::fs::write(&iso, &image).unwrap();

    let info = String::from_utf8(isoinfo(&["-d"], &iso)).unwrap();
    assert!(info.contains("Volume id: cidata\n"), "{info}");
    assert!(info.contains("Joliet"), "{info}");
    assert!(info.contains("Rock Ridge"), "{info}");
    // The image is dated with the spec's time, not the clock or 1980.
    let long = String::from_utf8(isoinfo(&["-l", "-R"], &iso)).unwrap();
    assert!(long.contains("Dec  2 2026"), "{long}");

    for tree in ["-J", "-R"] {
        let listing = String::from_utf8(isoinfo(&["-f", tree], &iso)).unwrap();
        let mut names: Vec<&str> = listing.lines().collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["/meta-data", "/user-data", "/vendor-data"],
            "{tree}"
        );

        let extract = |file: &str| isoinfo(&[tree, "-x", file], &iso);
        assert_eq!(
            extract("/meta-data"),
            b"instance-id: ep-0123456789abcdef\nlocal-hostname: proxy-a\n",
            "{tree}"
        );
        assert_eq!(
            extract("/user-data"),
            user_data.expose_secret().as_bytes(),
            "{tree}"
        );
        assert_eq!(extract("/vendor-data"), vendor.as_bytes(), "{tree}");
    }

    let label = run("blkid", &["-o", "value", "-s", "LABEL"], &iso);
    assert_eq!(String::from_utf8(label).unwrap().trim(), "cidata");
}

#[test]
fn no_user_data_gives_an_empty_user_data_file() {
    let name = Identifier::parse("ep-1").unwrap();
    let spec = SeedSpec {
        instance_id: &name,
        hostname: &name,
        user_data: None,
        vendor_data: "#cloud-config\n",
        time: Timestamp::from_unix_seconds(0).unwrap(),
        size_limit: DEFAULT_SIZE_LIMIT,
    };
    let dir = tempfile::tempdir().unwrap();
    let iso = dir.path().join("seed.iso");
    std::fs::write(&iso, build(&spec).unwrap()).unwrap();
    assert_eq!(isoinfo(&["-R", "-x", "/user-data"], &iso), b"");
    assert_eq!(
        isoinfo(&["-R", "-x", "/vendor-data"], &iso),
        b"#cloud-config\n"
    );
}

//! The generated stream methods against the sandbox daemon: a screenshot
//! from the test driver (its built-in picture), a QEMU domain's serial
//! console (SeaBIOS writes to it: no guest OS is needed) and a channel,
//! each opened, used both ways and ended; and streams the daemon refuses
//! to open (its REPLY is the error; nothing is left open).
//!
//! A tunnelled migration's incoming side is opened against the fake daemon
//! only (`tests/offline/fake_daemon.rs`): libvirtd 11.3 dies (a NULL
//! dereference in its QEMU driver) when sent `PREPARE_TUNNEL3` with the
//! TUNNELLED flag and an empty cookie (see `libvirt_rpc::stream`), and a
//! test must not take the shared daemon down.

use std::time::Duration;

use libvirt_rpc::*;
use testkit::Descriptor;
use testkit::names::unique;
use testkit::virsh::Virsh;

use crate::support::{self, Cleanup};

/// What the test driver sends as every domain's screenshot (libvirt's
/// package installs it).
const TEST_SCREENSHOT: &str = "/usr/share/libvirt/test-screenshot.png";

/// A QEMU domain that boots no OS, with SeaBIOS writing to the serial
/// port (`useserial`) and the devices named in `devices`.
fn serial_bios_xml(name: &str, devices: &str) -> String {
    format!(
        "<domain type='qemu'><name>{name}</name><memory unit='MiB'>32</memory>\
         <vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type>\
         <bios useserial='yes'/></os><devices>{devices}</devices></domain>"
    )
}

/// Starts `xml` on `qemu:///system` paused (nothing runs before the test
/// is ready to watch), with its clean-up.
async fn start_paused(c: &Client, cleanup: &mut Cleanup, name: &str, xml: &str) -> Domain {
    let dom = c
        .domain_create_xml(xml, DomainCreateFlags::START_PAUSED)
        .await
        .unwrap();
    cleanup.push(&["destroy", name]);
    dom
}

/// Reads `stream` until what it received contains `want`, within `bound`;
/// returns everything received. A quiet stream's [`Error::Timeout`] is
/// only a pause.
async fn read_until(stream: &mut Duplex, want: &str, bound: Duration) -> String {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(bound, async {
        loop {
            match stream.chunk().await {
                Ok(Some(data)) => {
                    seen.extend_from_slice(&data);
                    if String::from_utf8_lossy(&seen).contains(want) {
                        return;
                    }
                }
                Ok(None) => panic!("the console ended before {want:?}"),
                Err(Error::Timeout { .. }) => {}
                Err(e) => panic!("console: {e}"),
            }
        }
    })
    .await;
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        found.is_ok(),
        "no {want:?} on the console within {bound:?}; got {text:?}"
    );
    text
}

#[tokio::test]
async fn screenshot_of_a_test_driver_domain_is_the_drivers_picture() {
    let c = support::test_driver().await;
    let name = unique("shot");
    let dom = c
        .domain_create_xml(&support::domain_xml(&name), DomainCreateFlags::empty())
        .await
        .unwrap();
    let (mime, mut picture) = c
        .domain_screenshot(&dom, 0, NoFlags::empty())
        .await
        .unwrap();
    assert_eq!(mime.as_deref(), Some("image/png"));
    let mut got = Vec::new();
    while let Some(chunk) = picture.chunk().await.unwrap() {
        got.extend_from_slice(&chunk);
    }
    assert_eq!(picture.received(), got.len() as u64);
    let want = std::fs::read(TEST_SCREENSHOT).unwrap();
    assert!(
        got == want,
        "{} bytes, the driver's file has {}",
        got.len(),
        want.len()
    );
    // The connection goes on after the stream.
    c.domain_destroy(&dom).await.unwrap();
}

#[tokio::test]
async fn screenshot_refused_by_the_driver_opens_nothing_and_the_client_goes_on() {
    let c = support::test_driver().await;
    let dom = c.domain_lookup_by_name("test").await.unwrap();
    // The test driver takes no flags: the daemon's REPLY is its error, so
    // no stream is opened.
    let err = c
        .domain_screenshot(&dom, 0, NoFlags::from_bits_retain(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InvalidArg), "{err}");
    support::assert_lists_test_domain(&c).await;
}

/// Console, channel and migration in one test, one QEMU at a time: TCG on
/// a small machine is slow when several start together.
#[tokio::test]
async fn qemu_console_and_channel_carry_data_and_a_refused_migration_opens_nothing() {
    let d = Descriptor::require();
    console_carries_the_bios_output(&d).await;
    channel_opens_takes_data_and_finishes(&d).await;
    tunnelled_migration_refused_by_the_driver_opens_nothing().await;
}

async fn console_carries_the_bios_output(d: &Descriptor) {
    let c = support::qemu().await;
    let mut cleanup = Cleanup::new(Virsh::qemu(d));
    let name = unique("console");
    let xml = serial_bios_xml(&name, "<serial type='pty'/><console type='pty'/>");
    let dom = start_paused(&c, &mut cleanup, &name, &xml).await;
    let mut console = c
        .domain_open_console(&dom, None, DomainConsoleFlags::empty())
        .await
        .unwrap();
    c.domain_resume(&dom).await.unwrap();
    // SeaBIOS's banner, then its verdict on a machine with no disk.
    let text = read_until(&mut console, "SeaBIOS", Duration::from_secs(120)).await;
    assert!(console.received() >= text.len() as u64);
    // Keystrokes go the other way (SeaBIOS's boot menu key); the stream
    // keeps what arrives meanwhile for the next `chunk`.
    console.send(b"\x1b").await.unwrap();
    assert_eq!(console.sent(), 1);
    read_until(&mut console, "No bootable device", Duration::from_secs(120)).await;
    console.finish().await.unwrap();
    c.domain_destroy(&dom).await.unwrap();
}

async fn channel_opens_takes_data_and_finishes(d: &Descriptor) {
    let c = support::qemu().await;
    let mut cleanup = Cleanup::new(Virsh::qemu(d));
    let name = unique("channel");
    let xml = support::qemu_xml(
        &name,
        "<channel type='unix'><target type='virtio' name='org.example.rpc.0'/></channel>",
    );
    let dom = start_paused(&c, &mut cleanup, &name, &xml).await;
    let err = c
        .domain_open_channel(
            &dom,
            Some("org.example.absent"),
            DomainChannelFlags::empty(),
        )
        .await
        .unwrap_err();
    assert!(err.code().is_some(), "a libvirt error, got {err}");
    let mut channel = c
        .domain_open_channel(&dom, Some("org.example.rpc.0"), DomainChannelFlags::empty())
        .await
        .unwrap();
    channel.send(&[7u8; 1000]).await.unwrap();
    assert_eq!(channel.sent(), 1000);
    channel.finish().await.unwrap();
    c.domain_destroy(&dom).await.unwrap();
}

async fn tunnelled_migration_refused_by_the_driver_opens_nothing() {
    /// `VIR_MIGRATE_LIVE | VIR_MIGRATE_PEER2PEER`.
    const UNTUNNELLED: u64 = 1 | 2;
    let c = support::qemu().await;
    let name = unique("incoming");
    let xml = support::qemu_xml(&name, "");
    // The daemon decoded the arguments and its driver refused them: the
    // REPLY is the error, no stream is opened, the connection goes on.
    let err = c
        .domain_migrate_prepare_tunnel3(&[], UNTUNNELLED, None, 0, &xml)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InternalError), "{err}");
    assert!(err.to_string().contains("TUNNELLED"), "{err}");
    c.connect_get_version().await.unwrap();
}

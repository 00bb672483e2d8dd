//! The generated methods against a real daemon: every one is called once
//! (`libvirt_rpc::testing::sweep`) on a private instance of libvirt's test
//! driver, and each must come back with a decoded answer or a libvirt
//! error, never a codec error, a timeout or a dead link. The outcome of
//! each (answered, or which libvirt error) is pinned in
//! `sweep_test_driver.txt`: a change there is a change in what the daemon
//! or the generated code does (`UPDATE_SWEEP=1` rewrites it after review).

use std::fmt::Write as _;
use std::time::Duration;

use libvirt_rpc::testing::{Samples, sweep};
use libvirt_rpc::{Config, Error, NoFlags};

use crate::support;

/// The pinned outcomes, one `method outcome` line each.
const EXPECTED: &str = "tests/it/sweep_test_driver.txt";

/// A test-driver configuration of our own: opening `test:///<file>`
/// gives this connection a private driver instance, so whatever the sweep
/// does (undefining, destroying, ...) touches no other test.
const NODE_XML: &str = "<node>
  <cpu><mhz>2000</mhz><model>sweep</model><active>2</active><nodes>1</nodes>
    <sockets>1</sockets><cores>2</cores><threads>1</threads></cpu>
  <memory>4194304</memory>
  <domain type='test'>
    <name>sweep</name>
    <uuid>6695eb01-f6a4-8304-79aa-97f2502e193f</uuid>
    <memory>262144</memory><vcpu>1</vcpu>
    <os><type>hvm</type></os>
  </domain>
  <network>
    <name>sweepnet</name>
    <uuid>5a4e4ad3-e3a4-4b2a-9f6d-2b7b3b0c0f01</uuid>
    <bridge name='sweepbr0'/>
    <ip address='192.168.250.1' netmask='255.255.255.0'/>
  </network>
  <pool type='dir'>
    <name>sweep-pool</name>
    <uuid>35bb2ad9-388a-cdfe-461a-b8907f6e53fe</uuid>
    <target><path>/sweep-pool</path></target>
    <volume type='file'><name>sweep.img</name><capacity>1048576</capacity>
      <target><path>/sweep-pool/sweep.img</path></target></volume>
  </pool>
  <interface type='ethernet' name='sweep0'>
    <start mode='onboot'/><mac address='52:54:00:00:00:01'/>
  </interface>
</node>
";

#[tokio::test]
async fn every_generated_method_gets_an_answer_or_a_libvirt_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("node.xml");
    std::fs::write(&config, NODE_XML).unwrap();
    let uri = format!("test://{}", config.display());
    let c = support::connect_uri(
        &uri,
        Config::default().call_timeout(Duration::from_secs(20)),
    )
    .await;

    let mut s = Samples::default();
    s.domain = c.domain_lookup_by_name("sweep").await.unwrap();
    s.storage_pool = c.storage_pool_lookup_by_name("sweep-pool").await.unwrap();
    s.storage_vol = c
        .storage_vol_lookup_by_name(&s.storage_pool, "sweep.img")
        .await
        .unwrap();
    s.network = c.network_lookup_by_name("sweepnet").await.unwrap();
    s.interface = c.interface_lookup_by_name("sweep0").await.unwrap();
    s.domain_snapshot.dom = s.domain.clone();
    s.domain_checkpoint.dom = s.domain.clone();
    s.network_port.net = s.network.clone();

    let outcomes = sweep(&c, &s).await;
    assert!(outcomes.len() > 370, "{} methods swept", outcomes.len());
    let mut text = String::new();
    let mut broken = Vec::new();
    for (method, outcome) in &outcomes {
        let said = match outcome {
            Ok(()) => "answered".to_string(),
            Err(Error::Libvirt(e)) => format!("libvirt {:?}", e.code),
            Err(e) => {
                broken.push(format!("{method}: {e:?}"));
                format!("broken {e}")
            }
        };
        writeln!(text, "{method} {said}").unwrap();
    }
    assert!(broken.is_empty(), "not a libvirt answer: {broken:#?}");
    // The connection is still good after everything.
    c.connect_get_lib_version().await.unwrap();
    c.storage_pool_refresh(&s.storage_pool, NoFlags::empty())
        .await
        .ok();
    c.close().await;

    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(EXPECTED);
    if std::env::var_os("UPDATE_SWEEP").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    let was: std::collections::HashSet<&str> = expected.lines().collect();
    let differ: Vec<&str> = text.lines().filter(|l| !was.contains(l)).collect();
    assert!(
        differ.is_empty() && text.lines().count() == expected.lines().count(),
        "the outcomes differ from {EXPECTED} in: {differ:#?}; review, then UPDATE_SWEEP=1"
    );
}

//! The generated methods against a real daemon: every one is called once
//! (`libvirt_rpc::testing::sweep`) on a private instance of libvirt's test
//! driver, and a chosen set of read-only ones on `qemu:///system` with a
//! running QEMU domain; each must come back with a decoded answer or a
//! libvirt error, never a codec error, a timeout or a dead link. The
//! outcome of each (answered, or which libvirt error) is pinned in
//! `sweep_test_driver.txt` and `sweep_qemu.txt`: a change there is a
//! change in what the daemon or the generated code does (`UPDATE_SWEEP=1`
//! rewrites them after review). The crate's procedure table reports both.

use std::fmt::Write as _;
use std::time::Duration;

use libvirt_rpc::testing::{Samples, sweep};
use libvirt_rpc::{Config, DomainCreateFlags, Error, NoFlags};
use testkit::Descriptor;
use testkit::names::unique;
use testkit::virsh::Virsh;

use crate::support::{self, Cleanup};

/// The pinned outcomes, one `method outcome` line each.
const EXPECTED: &str = "tests/it/sweep_test_driver.txt";
/// The same for the chosen set on `qemu:///system`.
const EXPECTED_QEMU: &str = "tests/it/sweep_qemu.txt";

/// What is swept on `qemu:///system`: calls that read (the host, its
/// capabilities, a running domain, a pool) and change nothing. Everything
/// else could touch the host itself (suspend it, detach its devices,
/// change its interfaces) or other tests' objects.
const QEMU_CHOSEN: &[&str] = &[
    "connect_get_type",
    "connect_get_version",
    "connect_get_lib_version",
    "connect_get_hostname",
    "connect_get_uri",
    "connect_get_sysinfo",
    "connect_get_max_vcpus",
    "connect_get_capabilities",
    "connect_get_domain_capabilities",
    "connect_get_cpu_model_names",
    "connect_get_storage_pool_capabilities",
    "connect_get_all_domain_stats",
    "connect_is_secure",
    "connect_list_all_domains",
    "connect_list_all_storage_pools",
    "connect_list_all_networks",
    "node_get_info",
    "node_get_cpu_stats",
    "node_get_memory_stats",
    "node_get_free_memory",
    "node_get_cells_free_memory",
    "node_get_cpu_map",
    "node_get_security_model",
    "node_get_memory_parameters",
    "node_get_free_pages",
    "node_get_sev_info",
    "domain_get_info",
    "domain_get_state",
    "domain_get_xml_desc",
    "domain_get_os_type",
    "domain_get_max_memory",
    "domain_get_max_vcpus",
    "domain_get_vcpus",
    "domain_get_vcpus_flags",
    "domain_get_vcpu_pin_info",
    "domain_get_emulator_pin_info",
    "domain_get_iothread_info",
    "domain_get_scheduler_type",
    "domain_get_scheduler_parameters",
    "domain_get_scheduler_parameters_flags",
    "domain_get_blkio_parameters",
    "domain_get_memory_parameters",
    "domain_get_numa_parameters",
    "domain_get_cpu_stats",
    "domain_memory_stats",
    "domain_get_job_info",
    "domain_get_job_stats",
    "domain_get_control_info",
    "domain_get_autostart",
    "domain_is_active",
    "domain_is_persistent",
    "domain_is_updated",
    "domain_get_security_label",
    "domain_get_security_label_list",
    "domain_get_metadata",
    "domain_get_perf_events",
    "domain_get_launch_security_info",
    "domain_get_disk_errors",
    "domain_get_messages",
    "domain_has_managed_save_image",
    "domain_list_all_snapshots",
    "domain_list_all_checkpoints",
    "domain_interface_addresses",
    "domain_get_time",
    "domain_get_hostname",
    "domain_get_fsinfo",
    "domain_get_guest_vcpus",
    "domain_get_guest_info",
    "domain_screenshot",
    "domain_open_console",
    "qemu_domain_monitor_command",
    "qemu_domain_agent_command",
    "storage_pool_get_info",
    "storage_pool_get_xml_desc",
    "storage_pool_get_autostart",
    "storage_pool_is_active",
    "storage_pool_list_all_volumes",
];

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

    let outcomes = sweep(&c, &s, &|_| true).await;
    assert!(outcomes.len() > 370, "{} methods swept", outcomes.len());
    let text = outcomes_text(&outcomes);
    // The connection is still good after everything.
    c.connect_get_lib_version().await.unwrap();
    c.storage_pool_refresh(&s.storage_pool, NoFlags::empty())
        .await
        .ok();
    c.close().await;
    compare_with_pinned(&text, EXPECTED);
}

#[tokio::test]
async fn chosen_methods_on_qemu_get_an_answer_or_a_libvirt_error() {
    let d = Descriptor::require();
    let c = support::qemu().await;
    let mut cleanup = Cleanup::new(Virsh::qemu(&d));
    let name = unique("sweep");
    cleanup.push(&["destroy", &name]);
    let xml = support::qemu_xml(&name, "<video><model type='vga'/></video>");
    let s = Samples {
        domain: c
            .domain_create_xml(&xml, DomainCreateFlags::START_PAUSED)
            .await
            .unwrap(),
        storage_pool: c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap(),
        ..Samples::default()
    };
    let outcomes = sweep(&c, &s, &|m| QEMU_CHOSEN.contains(&m)).await;
    let swept: Vec<&str> = outcomes.iter().map(|(m, _)| *m).collect();
    let missing: Vec<&&str> = QEMU_CHOSEN.iter().filter(|m| !swept.contains(m)).collect();
    assert!(
        missing.is_empty(),
        "chosen but not generated or not sweepable: {missing:?}"
    );
    let text = outcomes_text(&outcomes);
    c.domain_destroy(&s.domain).await.unwrap();
    compare_with_pinned(&text, EXPECTED_QEMU);
}

/// One `method outcome` line per method; panics when an outcome is not a
/// decoded answer or a libvirt error.
fn outcomes_text(outcomes: &[(&str, libvirt_rpc::Result<()>)]) -> String {
    let mut text = String::new();
    let mut broken = Vec::new();
    for (method, outcome) in outcomes {
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
    text
}

/// Compares `text` with the pinned file `expected` (rewriting it first
/// under `UPDATE_SWEEP=1`).
fn compare_with_pinned(text: &str, expected: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(expected);
    if std::env::var_os("UPDATE_SWEEP").is_some() {
        std::fs::write(&path, text).unwrap();
    }
    let pinned = std::fs::read_to_string(&path).unwrap_or_default();
    let was: std::collections::HashSet<&str> = pinned.lines().collect();
    let differ: Vec<&str> = text.lines().filter(|l| !was.contains(l)).collect();
    assert!(
        differ.is_empty() && text.lines().count() == pinned.lines().count(),
        "the outcomes differ from {expected} in: {differ:#?}; review, then UPDATE_SWEEP=1"
    );
}

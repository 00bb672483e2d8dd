//! Every typed procedure against the sandbox daemon's `test:///default`
//! (volume streams are exercised against `qemu:///system` in streams.rs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use libvirt_rpc::*;
use testkit::Descriptor;
use testkit::names::unique;

fn domain_xml_with_nic(name: &str) -> String {
    format!(
        "<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory>\
         <os><type arch='x86_64'>hvm</type></os><devices>\
         <interface type='network'><mac address='52:54:00:12:34:56'/><source network='default'/></interface>\
         </devices></domain>"
    )
}

#[tokio::test]
async fn connection_procedures() {
    let c = support::test_driver().await;
    assert!(c.connect_get_version().await.unwrap() > 0);
    assert!(c.connect_get_lib_version().await.unwrap() >= 11_000_000);
    assert!(!c.connect_get_hostname().await.unwrap().is_empty());
    let caps = c.connect_get_capabilities().await.unwrap();
    assert!(caps.contains("<capabilities>"), "{caps}");
    assert!(
        c.connect_supports_feature(libvirt_rpc::DrvFeature::ProgramKeepalive)
            .await
            .unwrap(),
        "keepalive feature"
    );
    let auth = c.auth_list().await.unwrap();
    assert!(auth.is_empty() || auth.contains(&0), "{auth:?}");
    // Generic call with caller-supplied types: REMOTE_PROC_CONNECT_GET_TYPE = 3.
    let kind: String = c.call(3, &()).await.unwrap();
    assert_eq!(kind, "TEST");
    // An unknown procedure is the daemon's error, and the link survives.
    let e = c.call::<_, ()>(99_999, &()).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::Rpc), "{e:?}");
    c.connect_close().await.unwrap();
    // After connect-close the daemon refuses hypervisor calls.
    assert!(c.connect_get_version().await.is_err());
    c.close().await;
}

#[tokio::test]
async fn domain_procedures() {
    let c = support::test_driver().await;
    let name = unique("lvrpc-dom");
    let dom = c
        .domain_define_xml_flags(&domain_xml_with_nic(&name), DomainDefineFlags::empty())
        .await
        .unwrap();
    assert_eq!(dom.name, name);
    assert_eq!(dom.id, -1);
    let found = c.domain_lookup_by_name(&name).await.unwrap();
    assert_eq!(found.uuid, dom.uuid);
    assert!(
        c.connect_list_all_domains(ListDomainsFlags::INACTIVE)
            .await
            .unwrap()
            .iter()
            .any(|d| d.name == name)
    );
    let xml = c
        .domain_get_xml_desc(&dom, DomainXmlFlags::INACTIVE)
        .await
        .unwrap();
    assert!(xml.contains(&name));
    assert_eq!(c.domain_lookup_by_uuid(&dom.uuid).await.unwrap(), dom);
    let info = c.domain_get_info(&dom).await.unwrap();
    assert_eq!(info.state, DomainState::Shutoff);
    assert_eq!(info.max_mem, 65536, "KiB, as defined");
    assert_eq!(info.nr_virt_cpu, 1);

    let ns = "https://example.invalid/lvrpc";
    c.domain_set_metadata(
        &dom,
        MetadataType::Element,
        Some("<mark owner='t'/>"),
        Some("lvrpc"),
        Some(ns),
        DomainModificationImpact::CONFIG,
    )
    .await
    .unwrap();
    let meta = c
        .domain_get_metadata(
            &dom,
            MetadataType::Element,
            Some(ns),
            DomainModificationImpact::CONFIG,
        )
        .await
        .unwrap();
    assert!(meta.contains("owner=\"t\""), "{meta}");
    let missing = c
        .domain_get_metadata(
            &dom,
            MetadataType::Element,
            Some("urn:none"),
            DomainModificationImpact::CONFIG,
        )
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some(ErrorCode::NoDomainMetadata));
    assert!(missing.is_not_found());

    c.domain_create(&dom).await.unwrap();
    assert_eq!(
        c.domain_get_info(&dom).await.unwrap().state,
        DomainState::Running
    );
    let st = c.domain_get_state(&dom, NoFlags::empty()).await.unwrap();
    assert_eq!(st.state, DomainState::Running);
    let running = c.domain_lookup_by_name(&name).await.unwrap();
    assert!(running.id > 0);
    let ifaces = c
        .domain_interface_addresses(&running, InterfaceAddressesSource::Lease, NoFlags::empty())
        .await
        .unwrap();
    assert_eq!(ifaces.len(), 1, "{ifaces:?}");
    assert_eq!(ifaces[0].hwaddr.as_deref(), Some("52:54:00:12:34:56"));
    let state = |s: DomainStateInfo| (s.state, s.reason);
    c.domain_suspend(&running).await.unwrap();
    assert_eq!(
        state(c.domain_get_state(&dom, NoFlags::empty()).await.unwrap()),
        (DomainState::Paused, 1),
        "paused by user"
    );
    c.domain_resume(&running).await.unwrap();
    assert_eq!(
        state(c.domain_get_state(&dom, NoFlags::empty()).await.unwrap()),
        (DomainState::Running, 5),
        "running: unpaused"
    );
    c.domain_destroy(&running).await.unwrap();
    assert_eq!(
        c.domain_get_state(&dom, NoFlags::empty())
            .await
            .unwrap()
            .state,
        DomainState::Shutoff
    );

    let started = c
        .domain_create_with_flags(&dom, DomainCreateFlags::empty())
        .await
        .unwrap();
    assert!(started.id > 0, "{started:?}");
    c.domain_shutdown(&started).await.unwrap();
    assert_eq!(
        state(c.domain_get_state(&dom, NoFlags::empty()).await.unwrap()),
        (DomainState::Shutoff, 1),
        "shut off: shut down (the test driver's guest obeys at once)"
    );
    let started = c
        .domain_create_with_flags(&dom, DomainCreateFlags::empty())
        .await
        .unwrap();
    c.domain_destroy_flags(&started, DomainDestroyFlags::empty())
        .await
        .unwrap();
    c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
        .await
        .unwrap();
    let gone = c.domain_lookup_by_name(&name).await.unwrap_err();
    assert_eq!(gone.code(), Some(ErrorCode::NoDomain));
    assert!(gone.is_not_found());
    c.close().await;
}

#[tokio::test]
async fn storage_procedures() {
    let c = support::test_driver().await;
    let pool = c.storage_pool_lookup_by_name("default-pool").await.unwrap();
    c.storage_pool_refresh(&pool, NoFlags::empty())
        .await
        .unwrap();
    let info = c.storage_pool_get_info(&pool).await.unwrap();
    assert_eq!(info.state, 2, "running"); // VIR_STORAGE_POOL_RUNNING
    assert!(info.capacity > 0);
    let pools = c
        .connect_list_all_storage_pools(ListStoragePoolsFlags::ACTIVE)
        .await
        .unwrap();
    assert!(pools.contains(&pool), "{pools:?}");
    assert!(
        c.connect_list_all_storage_pools(ListStoragePoolsFlags::INACTIVE)
            .await
            .unwrap()
            .iter()
            .all(|p| p.name != "default-pool")
    );
    let pool_xml = c
        .storage_pool_get_xml_desc(&pool, StorageXmlFlags::empty())
        .await
        .unwrap();
    assert!(pool_xml.contains("<name>default-pool</name>"), "{pool_xml}");
    let name = unique("lvrpc-vol");
    let vol = c
        .storage_vol_create_xml(
            &pool,
            &support::volume_xml(&name, 1 << 20),
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    assert_eq!(vol.name, name);
    let found = c.storage_vol_lookup_by_name(&pool, &name).await.unwrap();
    assert_eq!(found, vol);
    let vi = c.storage_vol_get_info(&vol).await.unwrap();
    assert_eq!(vi.capacity, 1 << 20);
    let path = c.storage_vol_get_path(&vol).await.unwrap();
    assert!(path.ends_with(&format!("/{name}")), "{path}");
    assert_eq!(c.storage_vol_lookup_by_path(&path).await.unwrap(), vol);
    assert_eq!(c.storage_vol_lookup_by_key(&vol.key).await.unwrap(), vol);
    let vol_xml = c
        .storage_vol_get_xml_desc(&vol, NoFlags::empty())
        .await
        .unwrap();
    assert!(
        vol_xml.contains(&format!("<name>{name}</name>")),
        "{vol_xml}"
    );
    let copy_name = unique("lvrpc-copy");
    let copy = c
        .storage_vol_create_xml_from(
            &pool,
            &support::volume_xml(&copy_name, 1 << 20),
            &vol,
            StorageVolCreateFlags::empty(),
        )
        .await
        .unwrap();
    assert_eq!(copy.name, copy_name);
    assert_eq!(
        c.storage_vol_get_info(&copy).await.unwrap().capacity,
        1 << 20
    );
    c.storage_vol_delete(&copy, StorageVolDeleteFlags::empty())
        .await
        .unwrap();
    assert!(
        c.storage_pool_list_all_volumes(&pool, NoFlags::empty())
            .await
            .unwrap()
            .iter()
            .any(|v| v.name == name)
    );
    c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
        .await
        .unwrap();
    let gone = c
        .storage_vol_lookup_by_name(&pool, &name)
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Some(ErrorCode::NoStorageVol));
    let nopool = c
        .storage_pool_lookup_by_name(&unique("lvrpc-nopool"))
        .await
        .unwrap_err();
    assert_eq!(nopool.code(), Some(ErrorCode::NoStoragePool));
    c.close().await;
}

#[tokio::test]
async fn read_only_connection_refuses_writes() {
    let d = Descriptor::require();
    let sock = tokio::net::UnixStream::connect(&d.libvirt.socket)
        .await
        .unwrap();
    let c = Client::connect(
        sock,
        &d.libvirt.test_uri,
        OpenFlags::READ_ONLY,
        Config::default(),
    )
    .await
    .unwrap();
    c.connect_list_all_domains(ListDomainsFlags::empty())
        .await
        .unwrap();
    let e = c
        .domain_define_xml_flags(
            &support::domain_xml(&unique("lvrpc-ro")),
            DomainDefineFlags::empty(),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::OperationDenied), "{e:?}");
    c.close().await;
}

/// `virStorageVolGetInfoFlags` is not in the test driver: a sparse raw
/// volume in the sandbox's `dir` pool tells plain and physical sizes apart.
#[tokio::test]
async fn volume_info_flags_and_path_in_a_dir_pool() {
    let d = Descriptor::require();
    let c = support::qemu().await;
    let pool = c.storage_pool_lookup_by_name(&d.pool.name).await.unwrap();
    let name = unique("lvrpc-sparse");
    let xml = format!(
        "<volume><name>{name}</name><capacity unit='bytes'>{}</capacity>\
         <allocation unit='bytes'>0</allocation><target><format type='raw'/></target></volume>",
        4 << 20
    );
    let vol = c
        .storage_vol_create_xml(&pool, &xml, StorageVolCreateFlags::empty())
        .await
        .unwrap();
    let plain = c.storage_vol_get_info(&vol).await.unwrap();
    let physical = c
        .storage_vol_get_info_flags(&vol, StorageVolInfoFlags::GET_PHYSICAL)
        .await
        .unwrap();
    let path = c.storage_vol_get_path(&vol).await.unwrap();
    c.storage_vol_delete(&vol, StorageVolDeleteFlags::empty())
        .await
        .unwrap();
    assert_eq!(plain.capacity, 4 << 20);
    assert!(plain.allocation < 4 << 20, "sparse: {plain:?}");
    assert_eq!(physical.allocation, 4 << 20, "the file's length");
    assert_eq!(
        std::path::Path::new(&path),
        d.pool.dir.join(&name),
        "the volume's file in the pool's directory"
    );
    c.close().await;
}

/// The typed-parameter getters whose replies libvirtd serializes with the
/// caller's flags keep their string-valued parameters: the generated calls
/// send `VIR_TYPED_PARAM_STRING_OKAY` as libvirt's C library does
/// (without it the daemon leaves every string out, silently).
#[tokio::test]
async fn typed_param_getters_keep_string_parameters() {
    let c = support::test_driver().await;
    let name = unique("lvrpc-strings");
    let xml = format!(
        "<domain type='test'><name>{name}</name><memory unit='KiB'>65536</memory>\
         <blkiotune><weight>500</weight><device><path>/dev/sda</path><weight>100</weight></device></blkiotune>\
         <numatune><memory mode='strict' nodeset='0'/></numatune>\
         <os><type arch='x86_64'>hvm</type></os><devices>\
         <disk type='file' device='disk'><source file='/var/lib/lvrpc-none.img'/><target dev='vda' bus='virtio'/>\
         <iotune><total_bytes_sec>1000000</total_bytes_sec><group_name>lvrpc-group</group_name></iotune></disk>\
         </devices></domain>"
    );
    let dom = c
        .domain_define_xml_flags(&xml, DomainDefineFlags::empty())
        .await
        .unwrap();
    let string = |params: &[TypedParam], field: &str| -> Option<String> {
        params
            .iter()
            .find(|p| p.field == field)
            .map(|p| match &p.value {
                TypedParamValue::String(s) => s.clone(),
                other => panic!("{field} is not a string: {other:?}"),
            })
    };
    let config = DomainModificationImpact::CONFIG;

    let blkio = c.domain_get_blkio_parameters(&dom, config).await.unwrap();
    assert_eq!(
        string(&blkio, params::DOMAIN_BLKIO_DEVICE_WEIGHT).as_deref(),
        Some("/dev/sda,100"),
        "{blkio:?}"
    );
    let numa = c.domain_get_numa_parameters(&dom, config).await.unwrap();
    assert_eq!(
        string(&numa, params::DOMAIN_NUMA_NODESET).as_deref(),
        Some("0"),
        "{numa:?}"
    );
    let iotune = c
        .domain_get_block_io_tune(&dom, Some("vda"), config)
        .await
        .unwrap();
    assert_eq!(
        string(&iotune, params::DOMAIN_BLOCK_IOTUNE_GROUP_NAME).as_deref(),
        Some("lvrpc-group"),
        "{iotune:?}"
    );
    c.domain_undefine_flags(&dom, DomainUndefineFlags::empty())
        .await
        .unwrap();
    c.close().await;
}

#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Volume XML against the sandbox's real `dir` pool on qemu:///system: an
//! upload target filled with a qcow2 base, a marker written and read back,
//! an overlay backed by the base, and a seed ISO uploaded into the pool.

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use kvm2_provider::__internals::Timestamp;
use kvm2_provider::__internals::definition::seed_iso::{DEFAULT_SIZE_LIMIT, SeedSpec, build};
use kvm2_provider::__internals::images::ImageMarker;
use kvm2_provider::__internals::storage::volume_xml::{overlay_volume, raw_volume};
use kvm2_provider::__internals::storage::{BaseNames, VmVolumes};
use provider_api::Identifier;
use provider_api::config::ImageFormat;
use provider_api::config::values::{HttpUrl, Sha256Digest};
use sha2::{Digest, Sha256};
use testkit::Descriptor;

use testkit::virsh::Virsh;

/// Deletes the pool's volumes when the test ends, in reverse creation order.
struct Volumes<'a> {
    uri: &'a str,
    pool: &'a str,
    names: Vec<String>,
}

impl Volumes<'_> {
    fn create(&mut self, name: &str, xml: &str, dir: &Path) {
        let file = dir.join(format!("{name}.xml"));
        std::fs::write(&file, xml).unwrap();
        Virsh::new(self.uri).ok(&["vol-create", "--pool", self.pool, file.to_str().unwrap()]);
        self.names.push(name.to_owned());
    }

    fn upload(&self, name: &str, file: &Path) {
        Virsh::new(self.uri).ok(&[
            "vol-upload",
            "--pool",
            self.pool,
            name,
            file.to_str().unwrap(),
        ]);
    }

    fn path(&self, name: &str) -> String {
        Virsh::new(self.uri)
            .ok(&["vol-path", "--pool", self.pool, name])
            .trim()
            .to_owned()
    }
}

impl Drop for Volumes<'_> {
    fn drop(&mut self) {
        for name in self.names.iter().rev() {
            let _ = Virsh::new(self.uri).run(&["vol-delete", "--pool", self.pool, name]);
        }
    }
}

#[test]
fn base_marker_overlay_and_seed_in_a_real_pool() {
    let sandbox = Descriptor::require();
    let uri = sandbox.virsh_uri(&sandbox.libvirt.qemu_uri);
    let dir = tempfile::tempdir().unwrap();
    let suffix = format!(
        "{:x}{:x}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let entry = Identifier::parse(&format!("it-{suffix}")).unwrap();
    let key = Identifier::parse("tiny").unwrap();
    let names = BaseNames::new(&entry, &key, ImageFormat::Qcow2);
    let mut vols = Volumes {
        uri: &uri,
        pool: &sandbox.pool.name,
        names: Vec::new(),
    };

    // A small real qcow2 image stands in for a downloaded base.
    let image = dir.path().join("base.qcow2");
    let made = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2"])
        .arg(&image)
        .arg("64M")
        .status()
        .expect("run qemu-img");
    assert!(made.success());
    let bytes = std::fs::read(&image).unwrap();

    // Upload target: raw, sized by the declared length.
    let base = names.base();
    vols.create(
        &base,
        &raw_volume(&base, bytes.len() as u64).unwrap(),
        dir.path(),
    );
    vols.upload(&base, &image);
    let base_path = vols.path(&base);
    assert_eq!(std::fs::read(&base_path).unwrap(), bytes);

    // Marker, written last, read back byte for byte.
    let marker = ImageMarker {
        sha256: Sha256Digest::from_bytes(Sha256::digest(&bytes).into()),
        url: HttpUrl::parse("http://127.0.0.1:1/base.qcow2").unwrap(),
        format: ImageFormat::Qcow2,
        size: bytes.len() as u64,
    };
    let marker_file = dir.path().join("marker");
    std::fs::write(&marker_file, marker.render()).unwrap();
    let marker_name = names.marker();
    vols.create(
        &marker_name,
        &raw_volume(&marker_name, marker.render().len() as u64).unwrap(),
        dir.path(),
    );
    vols.upload(&marker_name, &marker_file);
    let back = dir.path().join("marker-back");
    Virsh::new(&uri).ok(&[
        "vol-download",
        "--pool",
        &sandbox.pool.name,
        &marker_name,
        back.to_str().unwrap(),
    ]);
    assert_eq!(
        ImageMarker::parse(&std::fs::read(&back).unwrap()),
        Some(marker)
    );

    // Overlay backed by the base, bigger than it.
    let domain = Identifier::parse(&format!("ep-{suffix}")).unwrap();
    let vm = VmVolumes::new(&entry, &domain);
    let overlay = vm.overlay();
    vols.create(
        &overlay,
        &overlay_volume(&overlay, 128 << 20, &base_path, ImageFormat::Qcow2).unwrap(),
        dir.path(),
    );
    let dump = Virsh::new(&uri).ok(&["vol-dumpxml", "--pool", &sandbox.pool.name, &overlay]);
    assert!(
        dump.contains(&format!("<path>{base_path}</path>")),
        "{dump}"
    );
    assert!(dump.contains("<format type='qcow2'/>"), "{dump}");
    let info = Command::new("qemu-img")
        .args(["info", "-U", "--output=json"])
        .arg(vols.path(&overlay))
        .output()
        .expect("run qemu-img info");
    let info = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.contains(&format!("\"backing-filename\": \"{base_path}\"")),
        "{info}"
    );
    assert!(info.contains("\"virtual-size\": 134217728"), "{info}");

    // Seed ISO uploaded into the pool, still a cidata image there.
    let seed = build(&SeedSpec {
        instance_id: &domain,
        hostname: &domain,
        user_data: None,
        vendor_data: "#cloud-config\n",
        time: Timestamp::from_unix_seconds(1_796_200_000).unwrap(),
        size_limit: DEFAULT_SIZE_LIMIT,
    })
    .unwrap();
    let seed_file = dir.path().join("seed.iso");
    std::fs::write(&seed_file, &seed).unwrap();
    let seed_name = vm.seed();
    vols.create(
        &seed_name,
        &raw_volume(&seed_name, seed.len() as u64).unwrap(),
        dir.path(),
    );
    vols.upload(&seed_name, &seed_file);
    let seed_path = vols.path(&seed_name);
    assert_eq!(std::fs::read(&seed_path).unwrap(), seed);
    let label = Command::new("isoinfo")
        .args(["-d", "-i", &seed_path])
        .output()
        .expect("run isoinfo");
    assert!(String::from_utf8_lossy(&label.stdout).contains("Volume id: cidata"));
}

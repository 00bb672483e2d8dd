#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Get, List-by-tag and the checker through `Kvm2Provider` (the trait the
//! operator calls), on an instance made by the provider's own Create: real
//! sshd, real libvirtd, a real QEMU domain without a guest OS.

use std::time::Duration;

use crate::sandbox_hosts::*;
use kvm2_provider::{Kvm2Provider, ProviderOptions};
use provider_api::{
    CheckReason, CreateRequest, ErrorClass, Identifier, InstanceState, ObjectName, OwnerUid,
    Provider, Tag, name_from_uid,
};
use testkit::Descriptor;
use testkit::providers_yaml::{Image, ProvidersYaml};

/// Removes the instance's domain and volumes and the entry's base volumes,
/// pass or fail.
struct Guard {
    uri: String,
    pool: String,
    domain: String,
    entry: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let virsh = testkit::virsh::Virsh::new(self.uri.as_str());
        let _ = virsh.run(&["destroy", &self.domain]);
        let _ = virsh.run(&["undefine", "--nvram", &self.domain]);
        let _ = virsh.run(&["pool-refresh", &self.pool]);
        {
            let out = virsh.run(&["vol-list", "--pool", &self.pool]);
            for line in String::from_utf8_lossy(&out.stdout).lines().skip(2) {
                if let Some(vol) = line.split_whitespace().next()
                    && (vol.contains(&format!("-{}.", self.entry)) || vol.contains(&self.domain))
                {
                    let _ = virsh.run(&["vol-delete", "--pool", &self.pool, vol]);
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_instance_reads_back_through_the_provider() {
    let sandbox = Descriptor::require();
    let body = crate::http_server::image(1 << 20);
    let sha = crate::http_server::digest(&body);
    let server = crate::http_server::Server::start(move |_| crate::http_server::Reply::Body {
        body: body.clone(),
        length: true,
    })
    .await;
    let entry = unique("p").replace("kvm2-itb-", "kb");
    let owner = OwnerUid::parse(&format!("uid-{entry}")).unwrap();
    let name = name_from_uid(&owner);
    let _guard = Guard {
        uri: sandbox.virsh_uri(&sandbox.libvirt.qemu_uri),
        pool: sandbox.pool.name.clone(),
        domain: name.to_string(),
        entry: entry.clone(),
    };
    let image = Image::new(
        "tiny",
        server.url("tiny.img").to_string(),
        sha.to_string(),
        "raw",
    );
    let config = ProvidersYaml::sandbox(&sandbox, &entry)
        .images([image])
        .kvm2();
    let mut options = ProviderOptions::default();
    options.hosts = crate::sandbox_hosts::options(&sandbox, &sandbox.libvirt.qemu_uri);
    options.start_watch = Duration::from_millis(500);
    let provider =
        Kvm2Provider::with_options(Identifier::parse(&entry).unwrap(), config, options).unwrap();

    let req = CreateRequest::new(
        owner.clone(),
        ObjectName::parse("proxy-a").unwrap(),
        Identifier::parse("default").unwrap(),
    );
    let created = provider.create(&req).await.unwrap();

    // Get: running QEMU, no guest OS: Provisioning without an address, not
    // an error.
    let got = provider.get(&created.id).await.unwrap();
    assert_eq!(got.state, InstanceState::Provisioning, "{got:?}");
    assert_eq!(got.ip, None);
    assert_eq!(got.id, created.id);
    assert!(got.created_at.is_some());

    // List-by-tag: the instance, with its owner.
    let listed = provider.list_by_tag(&Tag::managed()).await.unwrap();
    let mine: Vec<_> = listed.iter().filter(|l| l.id == created.id).collect();
    assert_eq!(mine.len(), 1, "{listed:?}");
    assert_eq!(mine[0].owner_uid, owner);

    // The checker: the one host, reachable.
    let checker = provider.checker().expect("kvm2 has a checker");
    let statuses = checker.check(Duration::from_secs(20)).await;
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].reason, CheckReason::Reachable, "{statuses:?}");

    // Deleted: Get says NotFound, the list no longer has it.
    provider.delete(&created.id).await.unwrap();
    let err = provider.get(&created.id).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::NotFound, "{err:?}");
    let listed = provider.list_by_tag(&Tag::managed()).await.unwrap();
    assert!(listed.iter().all(|l| l.id != created.id));
}

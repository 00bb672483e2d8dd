//! Who uses a base image: the volumes of its pool whose backing store is
//! the base's file, and the host's domains whose disks (or their backing
//! chains) name it. Asked before any base is deleted (debris included), so
//! a missing or corrupted marker can never destroy the disk under running
//! VMs (invariant 4: a base that overlays may use is never deleted).
//!
//! ```text
//!  base path ─▶ pool: every volume's XML ─▶ /volume/backingStore/path == base?
//!            ─▶ host: every domain's XML ─▶ /domain/devices/disk//source/@file == base?
//!  any ─▶ Users { volumes, domains } (kept, logged, reported)
//! ```
//!
//! The pool is listed in full (one `StoragePoolListAllVolumes`, then one
//! `StorageVolGetXMLDesc` per volume) and so are the host's domains (one
//! `ConnectListAllDomains`, then one `DomainGetXMLDesc` each): this runs
//! only on the rare paths that would delete a base. A volume or domain
//! that vanishes meanwhile is skipped; any other failure is an error, so
//! the caller keeps the base when in doubt.
//!
//! Known limit: an overlay outside the base's pool that no defined domain
//! uses is not seen (libvirt has no reverse index of backing files).

use libvirt_rpc::{Client, DomainXmlFlags, ListDomainsFlags, NoFlags, StoragePool};
use provider_api::{Error as ApiError, Identifier};
use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};

use crate::Error;
use crate::definition::MAX_DOCUMENT_LEN;
use crate::libvirt::{is_absent, observed, to_provider_error};
use libvirt_rpc::proc_num;

/// What references a base's file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    /// Volumes of the pool backed by it.
    pub volumes: Vec<String>,
    /// Domains whose disks name it (directly or in their backing chain).
    pub domains: Vec<String>,
}

impl Users {
    /// True when nothing references the base.
    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty() && self.domains.is_empty()
    }
}

impl std::fmt::Display for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[String]| {
            if v.len() > 5 {
                format!("{} and {} more", v[..5].join(", "), v.len() - 5)
            } else {
                v.join(", ")
            }
        };
        match (self.volumes.is_empty(), self.domains.is_empty()) {
            (true, true) => f.write_str("nothing"),
            (false, true) => write!(f, "volumes {}", list(&self.volumes)),
            (true, false) => write!(f, "domains {}", list(&self.domains)),
            (false, false) => write!(
                f,
                "volumes {}; domains {}",
                list(&self.volumes),
                list(&self.domains)
            ),
        }
    }
}

/// The volumes of `pool` and the domains of the host that reference
/// `path` (the base's file).
///
/// # Errors
/// As the [error table](crate::libvirt::errors) for the listing calls and
/// for any per-item read other than "it vanished"; an unreadable XML
/// document is an error too (the caller then keeps the base).
///
/// # Cancel safety
/// Cancel safe: read-only.
pub(crate) async fn users_of(
    host: &Identifier,
    client: &Client,
    pool: &StoragePool,
    path: &str,
) -> Result<Users, ApiError> {
    let mut users = Users::default();
    let vols = observed(
        host,
        proc_num::STORAGE_POOL_LIST_ALL_VOLUMES,
        client.storage_pool_list_all_volumes(pool, libvirt_rpc::NoFlags::empty()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {host}: list pool {}", pool.name), e))?;
    for vol in vols {
        let xml = match observed(
            host,
            proc_num::STORAGE_VOL_GET_XML_DESC,
            client.storage_vol_get_xml_desc(&vol, NoFlags::empty()),
        )
        .await
        {
            Ok(xml) => xml,
            Err(e) if is_absent(&e) => continue,
            Err(e) => {
                return Err(to_provider_error(
                    format!("host {host}: XML of volume {}", vol.name),
                    e,
                ));
            }
        };
        if volume_backing_paths(&xml)
            .map_err(ApiError::from)?
            .iter()
            .any(|p| p == path)
        {
            users.volumes.push(vol.name);
        }
    }
    let domains = observed(
        host,
        proc_num::CONNECT_LIST_ALL_DOMAINS,
        client.connect_list_all_domains(ListDomainsFlags::empty()),
    )
    .await
    .map_err(|e| to_provider_error(format!("host {host}: list domains"), e))?;
    for dom in domains {
        let xml = match observed(
            host,
            proc_num::DOMAIN_GET_XML_DESC,
            client.domain_get_xml_desc(&dom, DomainXmlFlags::empty()),
        )
        .await
        {
            Ok(xml) => xml,
            Err(e) if is_absent(&e) => continue,
            Err(e) => {
                return Err(to_provider_error(
                    format!("host {host}: XML of domain {}", dom.name),
                    e,
                ));
            }
        };
        if domain_disk_paths(&xml)
            .map_err(ApiError::from)?
            .iter()
            .any(|p| p == path)
        {
            users.domains.push(dom.name);
        }
    }
    Ok(users)
}

/// The backing store paths of a volume's XML
/// (`/volume/backingStore/path`, text).
///
/// # Errors
/// [`Error::XmlRead`] when the document is over [`MAX_DOCUMENT_LEN`] bytes
/// or is not well-formed.
pub fn volume_backing_paths(volume_xml: &str) -> Result<Vec<String>, Error> {
    collect(volume_xml, |path| {
        path == ["volume", "backingStore", "path"]
    })
}

/// Every file a domain's disks name, their backing chains included
/// (`source/@file` anywhere under `/domain/devices/disk`).
///
/// # Errors
/// As [`volume_backing_paths`].
pub fn domain_disk_paths(domain_xml: &str) -> Result<Vec<String>, Error> {
    collect(domain_xml, |path| {
        path.len() >= 4
            && path[..3] == ["domain", "devices", "disk"]
            && path.last().is_some_and(|l| l == "source")
    })
}

/// Walks `xml`; for each element whose path (from the root, the element
/// itself last) `wanted` accepts, collects its `file` attribute and its
/// text.
fn collect(xml: &str, wanted: impl Fn(&[String]) -> bool) -> Result<Vec<String>, Error> {
    let bad = |reason: String| Error::XmlRead { reason };
    if xml.len() > MAX_DOCUMENT_LEN {
        return Err(bad(format!("document is over {MAX_DOCUMENT_LEN} bytes")));
    }
    let mut reader = Reader::from_str(xml);
    let mut path: Vec<String> = Vec::new();
    let mut found = Vec::new();
    loop {
        let event = reader.read_event().map_err(|e| bad(e.to_string()))?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let local: String = e.local_name().as_ref().to_owned();
                path.push(local);
                if wanted(&path) {
                    for attr in e.attributes() {
                        let attr = attr.map_err(|e| bad(e.to_string()))?;
                        if attr.key.local_name().as_ref() == "file" {
                            let value = attr
                                .normalized_value(XmlVersion::Implicit1_0)
                                .map_err(|e| bad(e.to_string()))?;
                            found.push(value.into_owned());
                        }
                    }
                }
                if matches!(event, Event::Empty(_)) {
                    path.pop();
                }
            }
            Event::Text(ref t) if wanted(&path) => {
                let text = t.xml10_content();
                let text = text.trim();
                if !text.is_empty() {
                    found.push(text.to_owned());
                }
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volumes_backing_store_is_read() {
        let xml = "<volume type='file'><name>ov</name><target><path>/p/ov</path>\
            <format type='qcow2'/></target><backingStore><path>/p/base-e.k.qcow2</path>\
            <format type='qcow2'/></backingStore></volume>";
        assert_eq!(volume_backing_paths(xml).unwrap(), ["/p/base-e.k.qcow2"]);
        let plain = "<volume><name>b</name><target><path>/p/b</path></target></volume>";
        assert!(volume_backing_paths(plain).unwrap().is_empty());
    }

    #[test]
    fn a_domains_disks_and_their_chains_are_read() {
        let xml = "<domain><name>d</name><devices>\
            <disk type='file' device='disk'><source file='/p/ov.qcow2'/>\
              <backingStore type='file'><format type='qcow2'/><source file='/p/base.qcow2'/>\
              <backingStore/></backingStore></disk>\
            <disk type='file' device='cdrom'><source file='/p/seed.iso'></source></disk>\
            <interface type='bridge'><source bridge='br0'/></interface>\
            </devices><metadata><source file='/not/a/disk'/></metadata></domain>";
        assert_eq!(
            domain_disk_paths(xml).unwrap(),
            ["/p/ov.qcow2", "/p/base.qcow2", "/p/seed.iso"]
        );
    }

    #[test]
    fn malformed_or_huge_documents_are_errors() {
        assert!(domain_disk_paths("<domain><devices></domain>").is_err());
        let huge = "x".repeat(MAX_DOCUMENT_LEN + 1);
        assert!(volume_backing_paths(&huge).is_err());
    }

    #[test]
    fn users_print_briefly() {
        let u = Users {
            volumes: (0..7).map(|i| format!("v{i}")).collect(),
            domains: vec!["d".into()],
        };
        assert_eq!(
            u.to_string(),
            "volumes v0, v1, v2, v3, v4 and 2 more; domains d"
        );
        assert!(Users::default().is_empty());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in ".{0,300}") {
            let _ = domain_disk_paths(&s);
            let _ = volume_backing_paths(&s);
        }
    }
}

//! The MAC addresses of a domain's network interfaces, read from its XML
//! (`/domain/devices/interface/mac/@address`), so that an address the guest
//! agent reports can be tied to the NIC the provider gave the VM rather
//! than to whatever other interface the guest has (a container bridge, a
//! VPN tunnel).

use quick_xml::events::Event;
use quick_xml::{Reader, XmlVersion};

use crate::Error;
use crate::definition::MAX_DOCUMENT_LEN;

/// The interfaces' MAC addresses in document order, lower-cased.
///
/// # Errors
/// [`Error::XmlRead`] when the document is over
/// [`MAX_DOCUMENT_LEN`] bytes or is not well-formed.
pub fn interface_macs(domain_xml: &str) -> Result<Vec<String>, Error> {
    if domain_xml.len() > MAX_DOCUMENT_LEN {
        return Err(Error::XmlRead {
            reason: format!("document is over {MAX_DOCUMENT_LEN} bytes"),
        });
    }
    let mut reader = Reader::from_str(domain_xml);
    let mut path: Vec<String> = Vec::new();
    let mut macs = Vec::new();
    loop {
        let event = reader.read_event().map_err(|e| Error::XmlRead {
            reason: e.to_string(),
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let local: String = e.local_name().as_ref().to_owned();
                let at_mac = local == "mac" && path == ["domain", "devices", "interface"];
                if at_mac {
                    for attr in e.attributes() {
                        let attr = attr.map_err(|e| Error::XmlRead {
                            reason: e.to_string(),
                        })?;
                        if attr.key.local_name().as_ref() == "address" {
                            let value =
                                attr.normalized_value(XmlVersion::Implicit1_0)
                                    .map_err(|e| Error::XmlRead {
                                        reason: e.to_string(),
                                    })?;
                            macs.push(value.to_ascii_lowercase());
                        }
                    }
                }
                if matches!(event, Event::Start(_)) {
                    path.push(local);
                }
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(macs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_interface_macs_only() {
        let xml = "<domain type='kvm'><name>x</name><devices>\
            <interface type='bridge'><mac address='52:54:00:AB:cd:01'/><source bridge='br0'/></interface>\
            <hostdev><mac address='00:00:00:00:00:09'/></hostdev>\
            <interface type='network'>\n<mac address=\"52:54:00:00:00:02\"></mac></interface>\
            </devices><metadata><mac address='ff:ff:ff:ff:ff:ff'/></metadata></domain>";
        assert_eq!(
            interface_macs(xml).unwrap(),
            ["52:54:00:ab:cd:01", "52:54:00:00:00:02"]
        );
        assert!(
            interface_macs("<domain><devices/></domain>")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn malformed_or_huge_documents_are_errors() {
        assert!(interface_macs("<domain><devices></domain>").is_err());
        assert!(interface_macs("<domain><devices><interface><mac address='a&bogus;'/>").is_err());
        let huge = "x".repeat(MAX_DOCUMENT_LEN + 1);
        assert!(interface_macs(&huge).is_err());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_text_never_panics(s in ".{0,300}") {
            let _ = interface_macs(&s);
        }
    }
}

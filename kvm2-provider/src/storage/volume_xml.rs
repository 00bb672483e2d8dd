//! Storage volume XML for `virStorageVolCreateXML`: the upload target of a
//! base image, the marker, the per-VM qcow2 overlay and the seed ISO.
//!
//! Pure functions, serialised by quick-xml like the domain XML. Volume names
//! come from [`BaseNames`](super::BaseNames) and [`VmVolumes`](super::VmVolumes);
//! they are escaped anyway.
//!
//! Upload targets are created `raw` with the declared length (or 0 when the
//! server sent none): their bytes are opaque until the upload finishes, and a
//! `dir` pool grows the file as the stream writes. The overlay names its
//! backing file by path and format explicitly, so libvirt never probes a
//! format from guest-controlled bytes.

use provider_api::config::ImageFormat;
use serde::Serialize;

use crate::Error;
use crate::definition::disk_path;

/// A raw volume of `capacity` bytes that a stream upload will fill: a base
/// image's upload target, a marker or a seed ISO.
///
/// # Errors
/// [`Error::XmlWrite`] if serialisation fails.
pub fn raw_volume(name: &str, capacity: u64) -> Result<String, Error> {
    render(&VolumeXml {
        name,
        capacity: Capacity::bytes(capacity),
        target: Target {
            format: Format { format: "raw" },
        },
        backing_store: None,
    })
}

/// A published base image of `format`, made by cloning a verified upload
/// (`virStorageVolCreateXMLFrom`): raw → raw is a byte copy on the host;
/// qcow2 → qcow2 is a `qemu-img convert` (same guest-visible contents).
///
/// # Errors
/// [`Error::InvalidValue`] for a format the provider does not support;
/// [`Error::XmlWrite`] if serialisation fails.
pub fn base_volume(name: &str, capacity: u64, format: ImageFormat) -> Result<String, Error> {
    render(&VolumeXml {
        name,
        capacity: Capacity::bytes(capacity),
        target: Target {
            format: Format {
                format: format_name(format)?,
            },
        },
        backing_store: None,
    })
}

fn format_name(format: ImageFormat) -> Result<&'static str, Error> {
    match format {
        ImageFormat::Qcow2 => Ok("qcow2"),
        ImageFormat::Raw => Ok("raw"),
        other => Err(Error::invalid(
            "image format",
            format!("{other} is not supported by this provider"),
        )),
    }
}

/// A qcow2 overlay of `capacity` bytes (the VM's disk size) backed by the
/// base image at `backing_path`.
///
/// # Errors
/// [`Error::InvalidValue`] when `backing_path` is not an absolute path XML
/// can carry; [`Error::XmlWrite`] if serialisation fails.
pub fn overlay_volume(
    name: &str,
    capacity: u64,
    backing_path: &str,
    backing_format: ImageFormat,
) -> Result<String, Error> {
    disk_path("backing path", backing_path)?;
    let backing_format = format_name(backing_format)?;
    render(&VolumeXml {
        name,
        capacity: Capacity::bytes(capacity),
        target: Target {
            format: Format { format: "qcow2" },
        },
        backing_store: Some(BackingStore {
            path: backing_path,
            format: Format {
                format: backing_format,
            },
        }),
    })
}

fn render(volume: &VolumeXml<'_>) -> Result<String, Error> {
    quick_xml::se::to_string(volume).map_err(Error::XmlWrite)
}

#[derive(Serialize)]
#[serde(rename = "volume")]
struct VolumeXml<'a> {
    name: &'a str,
    capacity: Capacity,
    target: Target,
    #[serde(rename = "backingStore", skip_serializing_if = "Option::is_none")]
    backing_store: Option<BackingStore<'a>>,
}

#[derive(Serialize)]
struct Capacity {
    #[serde(rename = "@unit")]
    unit: &'static str,
    #[serde(rename = "$text")]
    value: u64,
}

impl Capacity {
    fn bytes(value: u64) -> Self {
        Self {
            unit: "bytes",
            value,
        }
    }
}

#[derive(Serialize)]
struct Target {
    format: Format,
}

#[derive(Serialize)]
struct Format {
    #[serde(rename = "@type")]
    format: &'static str,
}

#[derive(Serialize)]
struct BackingStore<'a> {
    path: &'a str,
    format: Format,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_volume_carries_its_format() {
        assert_eq!(
            base_volume("base-e.k.qcow2", 42, ImageFormat::Qcow2).unwrap(),
            "<volume><name>base-e.k.qcow2</name>\
             <capacity unit=\"bytes\">42</capacity>\
             <target><format type=\"qcow2\"/></target></volume>"
        );
        assert!(
            base_volume("base-e.k.raw", 1, ImageFormat::Raw)
                .unwrap()
                .contains("<format type=\"raw\"/>")
        );
    }

    #[test]
    fn raw_upload_target() {
        assert_eq!(
            raw_volume("tmp-e.k.0000000000000001.qcow2", 42).unwrap(),
            "<volume><name>tmp-e.k.0000000000000001.qcow2</name>\
             <capacity unit=\"bytes\">42</capacity>\
             <target><format type=\"raw\"/></target></volume>"
        );
    }

    #[test]
    fn overlay_names_its_backing_file_and_format() {
        let xml = overlay_volume(
            "vm-x.overlay.qcow2",
            10 << 30,
            "/pool/base-e.k.raw",
            ImageFormat::Raw,
        )
        .unwrap();
        assert!(
            xml.contains("<target><format type=\"qcow2\"/></target>"),
            "{xml}"
        );
        assert!(
            xml.contains(
                "<backingStore><path>/pool/base-e.k.raw</path><format type=\"raw\"/></backingStore>"
            ),
            "{xml}"
        );
        assert!(overlay_volume("v", 1, "relative/base", ImageFormat::Qcow2).is_err());
        // Names are data, not markup.
        let xml = raw_volume("a<b>&'\"", 1).unwrap();
        assert!(xml.contains("<name>a&lt;b&gt;&amp;'\"</name>"), "{xml}");
    }
}

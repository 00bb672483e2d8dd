//! Storage volume names: base images, temporary uploads, markers and the
//! per-VM overlay and seed.
//!
//! Every name is built from validated identifiers, so no configuration value
//! can smuggle a `/`, a `..` or an XML metacharacter into a volume name, and
//! the mapping from inputs to names is injective:
//!
//! | volume | name |
//! |---|---|
//! | base image | `base-<entry>--<key>.<fmt>` |
//! | its marker | `base-<entry>--<key>.<fmt>.marker` |
//! | upload in progress | `tmp-<entry>--<key>.<nonce>.<fmt>` |
//! | VM overlay | `vm-<domain>.overlay.qcow2` |
//! | VM seed ISO | `vm-<domain>.seed.iso` |
//!
//! The provider entry is part of every base name (H4: two entries never share
//! a base). Entry and key are joined with `--`, which an identifier cannot
//! contain, start or end with `-`, so `base-a-b--c` has exactly one reading.

use std::fmt;

use crate::Error;

/// Longest identifier accepted. Keeps volume names well under the 255-byte
/// file-name limit of the pool's file system.
pub const MAX_IDENTIFIER_LEN: usize = 63;

/// Checks that `value` may appear in a volume or domain name.
///
/// An identifier is 1–63 characters of `a-z`, `0-9` and `-`, neither starting
/// nor ending with `-` and never containing `--`.
///
/// # Errors
/// [`Error::InvalidValue`] naming `field` when the value does not qualify.
pub fn check_identifier(field: &'static str, value: &str) -> Result<(), Error> {
    if value.is_empty() || value.len() > MAX_IDENTIFIER_LEN {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_IDENTIFIER_LEN} characters long"),
        ));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(Error::invalid(
            field,
            "may contain only lowercase letters, digits and '-'",
        ));
    }
    if value.starts_with('-') || value.ends_with('-') || value.contains("--") {
        return Err(Error::invalid(
            field,
            "must not start or end with '-' or contain \"--\"",
        ));
    }
    Ok(())
}

/// Disk image format of a base image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageFormat {
    /// QEMU copy-on-write v2.
    Qcow2,
    /// Raw disk image.
    Raw,
}

impl ImageFormat {
    /// The name libvirt uses (`qcow2`, `raw`), also the file suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageFormat::Qcow2 => "qcow2",
            ImageFormat::Raw => "raw",
        }
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The names of one cached base image: its volume, marker and upload names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseNames {
    entry: String,
    key: String,
    format: ImageFormat,
}

impl BaseNames {
    /// Names for image `key` of provider entry `entry`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `entry` or `key` is not an identifier
    /// (see [`check_identifier`]).
    pub fn new(entry: &str, key: &str, format: ImageFormat) -> Result<Self, Error> {
        check_identifier("provider entry name", entry)?;
        check_identifier("image key", key)?;
        Ok(Self {
            entry: entry.to_owned(),
            key: key.to_owned(),
            format,
        })
    }

    /// The image format.
    pub fn format(&self) -> ImageFormat {
        self.format
    }

    /// The published base volume: `base-<entry>--<key>.<fmt>`.
    pub fn base(&self) -> String {
        format!("base-{}--{}.{}", self.entry, self.key, self.format)
    }

    /// The marker volume, written last, recording digest and URL:
    /// `base-<entry>--<key>.<fmt>.marker`.
    pub fn marker(&self) -> String {
        format!("{}.marker", self.base())
    }

    /// A temporary upload name, unique per `nonce`:
    /// `tmp-<entry>--<key>.<nonce as 16 hex digits>.<fmt>`.
    pub fn upload(&self, nonce: u64) -> String {
        format!(
            "tmp-{}--{}.{nonce:016x}.{}",
            self.entry, self.key, self.format
        )
    }

    /// True when `volume` is a temporary upload of this base (any nonce):
    /// debris when no upload is running.
    pub fn is_upload(&self, volume: &str) -> bool {
        let prefix = format!("tmp-{}--{}.", self.entry, self.key);
        let suffix = format!(".{}", self.format);
        volume
            .strip_prefix(&prefix)
            .and_then(|rest| rest.strip_suffix(&suffix))
            .is_some_and(|nonce| nonce.len() == 16 && nonce.bytes().all(|b| b.is_ascii_hexdigit()))
    }
}

/// The per-VM volumes of one domain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmVolumes {
    domain: String,
}

impl VmVolumes {
    /// Names for the volumes of domain `domain`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] when `domain` is not an identifier.
    pub fn new(domain: &str) -> Result<Self, Error> {
        check_identifier("domain name", domain)?;
        Ok(Self {
            domain: domain.to_owned(),
        })
    }

    /// The qcow2 overlay backed by the base: `vm-<domain>.overlay.qcow2`.
    pub fn overlay(&self) -> String {
        format!("vm-{}.overlay.qcow2", self.domain)
    }

    /// The cloud-init seed ISO: `vm-<domain>.seed.iso`.
    pub fn seed(&self) -> String {
        format!("vm-{}.seed.iso", self.domain)
    }

    /// Every volume this domain owns, in deletion order.
    pub fn all(&self) -> [String; 2] {
        [self.overlay(), self.seed()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn base_names_carry_the_entry() {
        let n = BaseNames::new("kvm2-home", "debian-13", ImageFormat::Qcow2).unwrap();
        assert_eq!(n.base(), "base-kvm2-home--debian-13.qcow2");
        assert_eq!(n.marker(), "base-kvm2-home--debian-13.qcow2.marker");
        assert_eq!(
            n.upload(0xab),
            "tmp-kvm2-home--debian-13.00000000000000ab.qcow2"
        );
        assert!(n.is_upload(&n.upload(7)));
        assert!(!n.is_upload(&n.base()));
        assert!(!n.is_upload("tmp-kvm2-home--debian-13.xyz.qcow2"));
        let other = BaseNames::new("kvm2-home", "debian", ImageFormat::Qcow2).unwrap();
        assert!(!other.is_upload(&n.upload(7)));
    }

    #[test]
    fn vm_volume_names() {
        let v = VmVolumes::new("proxy-1234").unwrap();
        assert_eq!(v.overlay(), "vm-proxy-1234.overlay.qcow2");
        assert_eq!(v.seed(), "vm-proxy-1234.seed.iso");
        assert_eq!(v.all(), [v.overlay(), v.seed()]);
    }

    #[test]
    fn identifiers_reject_what_could_escape_or_collide() {
        for bad in [
            "",
            "A",
            "a/b",
            "..",
            "a.b",
            "-a",
            "a-",
            "a--b",
            "a b",
            "a'b",
            "a<b",
            "ä",
            &"a".repeat(64),
        ] {
            assert!(check_identifier("x", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["a", "kvm2-home", "0", &"a".repeat(63)] {
            assert!(check_identifier("x", good).is_ok(), "{good:?} rejected");
        }
    }

    #[test]
    fn invalid_entry_names_the_field() {
        let e = BaseNames::new("Bad", "k", ImageFormat::Raw).unwrap_err();
        assert!(e.to_string().contains("provider entry name"), "{e}");
    }

    proptest! {
        // H4: distinct (entry, key, format) never share a base, marker or upload.
        #[test]
        fn base_names_are_injective(
            a in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            b in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            c in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            d in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
        ) {
            let x = BaseNames::new(&a, &b, ImageFormat::Qcow2).unwrap();
            let y = BaseNames::new(&c, &d, ImageFormat::Qcow2).unwrap();
            prop_assert_eq!(x.base() == y.base(), a == c && b == d);
            prop_assert_eq!(x.upload(1) == y.upload(1), a == c && b == d);
            let vx = VmVolumes::new(&a).unwrap();
            prop_assert_ne!(vx.overlay(), x.base());
            prop_assert_ne!(vx.seed(), x.marker());
        }
    }
}

//! Storage volume names: base images, their markers and fill leases, and the
//! per-VM overlay and seed.
//!
//! Every name is built from [`Identifier`]s (`a-z`, `0-9`, `-`; no `.`, no
//! `/`), so no configuration value can smuggle a path or an XML
//! metacharacter into a volume name, and because `.` separates the fields
//! the mapping from inputs to names is injective:
//!
//! | volume | name |
//! |---|---|
//! | base image | `base-<entry>.<key>.<fmt>` |
//! | its marker | `base-<entry>.<key>.<fmt>.marker` |
//! | its fill lease (while a fill uploads into the base) | `base-<entry>.<key>.<fmt>.fill` |
//! | VM overlay | `vm-<entry>.<domain>.overlay.qcow2` |
//! | VM seed ISO | `vm-<entry>.<domain>.seed.iso` |
//!
//! The provider entry is part of every base name (invariant 5: two entries never share
//! a base). The issue sketched `base-<entry>-<key>`; with `-` allowed inside
//! identifiers that form is ambiguous (`a-b` + `c` and `a` + `b-c`), so the
//! separator is `.`.

use provider_api::Identifier;
use provider_api::config::ImageFormat;

/// The names of one cached base image: its volume, marker and fill lease.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseNames {
    entry: Identifier,
    key: Identifier,
    format: ImageFormat,
}

impl BaseNames {
    /// Names for image `key` of provider entry `entry`.
    pub fn new(entry: &Identifier, key: &Identifier, format: ImageFormat) -> Self {
        Self {
            entry: entry.clone(),
            key: key.clone(),
            format,
        }
    }

    /// The image format.
    pub fn format(&self) -> ImageFormat {
        self.format
    }

    /// The published base volume: `base-<entry>.<key>.<fmt>`.
    pub fn base(&self) -> String {
        format!("base-{}.{}.{}", self.entry, self.key, self.format)
    }

    /// The marker volume, written last, recording digest and URL:
    /// `base-<entry>.<key>.<fmt>.marker`.
    pub fn marker(&self) -> String {
        format!("{}.marker", self.base())
    }

    /// The fill lease, held while a fill uploads into the base
    /// ([fill lease](crate::images::Lease)): `base-<entry>.<key>.<fmt>.fill`.
    pub fn fill_lease(&self) -> String {
        format!("{}.fill", self.base())
    }
}

/// The per-VM volumes of one domain made by one provider entry. The entry is
/// part of the names (invariant 5): two entries sharing a pool never touch each
/// other's volumes, even for the same owner (the same domain name).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VmVolumes {
    entry: Identifier,
    domain: Identifier,
}

impl VmVolumes {
    /// Names for the volumes of domain `domain` made by entry `entry`.
    pub fn new(entry: &Identifier, domain: &Identifier) -> Self {
        Self {
            entry: entry.clone(),
            domain: domain.clone(),
        }
    }

    /// The qcow2 overlay backed by the base:
    /// `vm-<entry>.<domain>.overlay.qcow2`.
    pub fn overlay(&self) -> String {
        format!("vm-{}.{}.overlay.qcow2", self.entry, self.domain)
    }

    /// The cloud-init seed ISO: `vm-<entry>.<domain>.seed.iso`.
    pub fn seed(&self) -> String {
        format!("vm-{}.{}.seed.iso", self.entry, self.domain)
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

    fn id(s: &str) -> Identifier {
        Identifier::parse(s).unwrap()
    }

    #[test]
    fn base_names_carry_the_entry() {
        let n = BaseNames::new(&id("kvm2-home"), &id("debian-13"), ImageFormat::Qcow2);
        assert_eq!(n.base(), "base-kvm2-home.debian-13.qcow2");
        assert_eq!(n.marker(), "base-kvm2-home.debian-13.qcow2.marker");
        assert_eq!(n.fill_lease(), "base-kvm2-home.debian-13.qcow2.fill");
        let raw = BaseNames::new(&id("kvm2-home"), &id("debian-13"), ImageFormat::Raw);
        assert_eq!(raw.base(), "base-kvm2-home.debian-13.raw");
    }

    #[test]
    fn vm_volume_names() {
        let v = VmVolumes::new(&id("kvm2-home"), &id("ep-0123456789abcdef"));
        assert_eq!(
            v.overlay(),
            "vm-kvm2-home.ep-0123456789abcdef.overlay.qcow2"
        );
        assert_eq!(v.seed(), "vm-kvm2-home.ep-0123456789abcdef.seed.iso");
        assert_eq!(v.all(), [v.overlay(), v.seed()]);
    }

    proptest! {
        // invariant 5: distinct (entry, key) never share a base, marker or upload,
        // even when '-' could be read as a separator.
        #[test]
        fn base_names_are_injective(
            a in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            b in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            c in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            d in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
        ) {
            let x = BaseNames::new(&id(&a), &id(&b), ImageFormat::Qcow2);
            let y = BaseNames::new(&id(&c), &id(&d), ImageFormat::Qcow2);
            let same = a == c && b == d;
            prop_assert_eq!(x.base() == y.base(), same);
            prop_assert_eq!(x.marker() == y.marker(), same);
            prop_assert_eq!(x.fill_lease() == y.fill_lease(), same);
        }

        // invariant 5 for the per-VM volumes: distinct (entry, domain) never share one.
        #[test]
        fn vm_names_are_injective(
            a in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            b in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            c in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
            d in "[a-z0-9]{1,3}(-[a-z0-9]{1,3}){0,2}",
        ) {
            let x = VmVolumes::new(&id(&a), &id(&b));
            let y = VmVolumes::new(&id(&c), &id(&d));
            let same = a == c && b == d;
            prop_assert_eq!(x.overlay() == y.overlay(), same);
            prop_assert_eq!(x.seed() == y.seed(), same);
        }
    }
}

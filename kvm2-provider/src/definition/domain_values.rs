//! The values a [`DomainSpec`](super::DomainSpec) is made of,
//! each parsed once where it enters (the newtype pattern of
//! `provider_api::config::values`): a `RULE`, a constructor that is the only
//! way to build one, and so no check left for
//! [`render`](super::domain_xml::render) to make.

use std::fmt;

use provider_api::config::Firmware;
use provider_api::config::values::AbsolutePath;

use crate::Error;

/// Largest memory size accepted, in MiB (1 TiB).
pub const MAX_MEMORY_MIB: u64 = 1 << 20;
/// Largest vCPU count accepted.
pub const MAX_VCPUS: u32 = 256;

/// A path of a disk or backing file: the one path rule of this crate is
/// [`AbsolutePath`]'s (absolute, normalised, no whitespace, control or
/// non-XML characters), so a path XML carries is never ambiguous.
///
/// # Errors
/// [`Error::InvalidValue`] naming `field`, with the rule.
pub fn disk_path(field: &'static str, path: &str) -> Result<AbsolutePath, Error> {
    AbsolutePath::parse(path).map_err(|_| Error::invalid(field, AbsolutePath::RULE))
}

/// Guest memory in MiB, 1..=[`MAX_MEMORY_MIB`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryMib(u64);

impl MemoryMib {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be 1 to 1048576 MiB";

    /// Checks `mib`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] (`memory`) with [`Self::RULE`].
    pub fn new(mib: u64) -> Result<Self, Error> {
        if (1..=MAX_MEMORY_MIB).contains(&mib) {
            Ok(Self(mib))
        } else {
            Err(Error::invalid("memory", Self::RULE))
        }
    }

    /// The size in MiB.
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A vCPU count, 1..=[`MAX_VCPUS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vcpus(u32);

impl Vcpus {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be 1 to 256";

    /// Checks `count`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] (`vcpus`) with [`Self::RULE`].
    pub fn new(count: u32) -> Result<Self, Error> {
        if (1..=MAX_VCPUS).contains(&count) {
            Ok(Self(count))
        } else {
            Err(Error::invalid("vcpus", Self::RULE))
        }
    }

    /// The count.
    pub fn get(self) -> u32 {
        self.0
    }
}

/// A QEMU machine type such as `q35`: 1 to 64 ASCII letters, digits, `.`,
/// `-` or `_`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineName(String);

impl MachineName {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be 1 to 64 ASCII letters, digits, '.', '-' or '_'";

    /// Parses `s`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] (`machine type`) with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, Error> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_');
        if s.is_empty() || s.len() > 64 || !s.bytes().all(allowed) {
            return Err(Error::invalid("machine type", Self::RULE));
        }
        Ok(Self(s.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A unicast MAC address: six colon-separated hex octets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MacAddress(String);

impl MacAddress {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be six hex octets like 52:54:00:12:34:56, unicast";

    /// Parses `s`.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] (`MAC address`) with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, Error> {
        let octets: Vec<&str> = s.split(':').collect();
        let well_formed = octets.len() == 6
            && octets
                .iter()
                .all(|o| o.len() == 2 && o.bytes().all(|b| b.is_ascii_hexdigit()));
        let unicast = octets
            .first()
            .and_then(|o| u8::from_str_radix(o, 16).ok())
            .is_some_and(|first| first & 1 == 0);
        if well_formed && unicast {
            Ok(Self(s.to_owned()))
        } else {
            Err(Error::invalid("MAC address", Self::RULE))
        }
    }

    /// The address.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The firmware this provider can boot a guest with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootFirmware {
    /// SeaBIOS.
    Bios,
    /// UEFI through libvirt's firmware auto-selection, secure boot off. A
    /// UEFI domain gets an NVRAM file: undefine it with
    /// `VIR_DOMAIN_UNDEFINE_NVRAM`.
    Uefi,
}

impl BootFirmware {
    /// The config's firmware, if this provider supports it.
    ///
    /// # Errors
    /// [`Error::InvalidValue`] (`firmware`) for a firmware the config
    /// schema knows and this provider does not.
    pub fn from_config(firmware: Firmware) -> Result<Self, Error> {
        match firmware {
            Firmware::Bios => Ok(Self::Bios),
            Firmware::Uefi => Ok(Self::Uefi),
            other => Err(Error::invalid(
                "firmware",
                format!("{other} is not supported by this provider"),
            )),
        }
    }
}

impl fmt::Display for MachineName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One case per rule: each constructor refuses what render used to,
    /// naming the same field.
    #[test]
    fn each_rule_refuses_what_cannot_be_represented() {
        let field = |r: Result<(), Error>| match r {
            Err(Error::InvalidValue { field, .. }) => field,
            other => panic!("expected InvalidValue, got {other:?}"),
        };
        let cases: Vec<(&str, Result<(), Error>)> = vec![
            ("memory", MemoryMib::new(0).map(drop)),
            ("memory", MemoryMib::new(MAX_MEMORY_MIB + 1).map(drop)),
            ("vcpus", Vcpus::new(0).map(drop)),
            ("vcpus", Vcpus::new(MAX_VCPUS + 1).map(drop)),
            ("machine type", MachineName::parse("q35'/>").map(drop)),
            ("machine type", MachineName::parse("").map(drop)),
            ("overlay path", disk_path("overlay path", "rel/x").map(drop)),
            (
                "overlay path",
                disk_path("overlay path", "/a/../b").map(drop),
            ),
            ("seed path", disk_path("seed path", "/a\u{1}b").map(drop)),
            ("seed path", disk_path("seed path", "/a\u{FFFF}").map(drop)),
            (
                "MAC address",
                MacAddress::parse("01:00:00:00:00:00").map(drop),
            ),
            ("MAC address", MacAddress::parse("52:54:00:12:34").map(drop)),
        ];
        for (expected, result) in cases {
            assert_eq!(field(result), expected);
        }
        assert_eq!(
            MemoryMib::new(MAX_MEMORY_MIB).unwrap().get(),
            MAX_MEMORY_MIB
        );
        assert_eq!(Vcpus::new(1).unwrap().get(), 1);
        assert_eq!(
            MachineName::parse("pc-q35-9.2").unwrap().as_str(),
            "pc-q35-9.2"
        );
        assert!(MacAddress::parse("52:54:00:12:34:56").is_ok());
        assert!(disk_path("seed path", "/pool/a'b\"c<d>&e.qcow2").is_ok());
    }
}

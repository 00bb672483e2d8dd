//! What a guest is made of, built as pure functions: domain XML, the
//! ownership mark, the seed ISO and its vendor data.
//!
//! Other subsystems build a guest with `domain_xml::render` of a
//! [`DomainSpec`] (its values parsed once: [`MemoryMib`], [`MacAddress`],
//! [`disk_path`], ...), `seed_iso::build` of a [`SeedSpec`] and
//! `vendor_data::render`, and mark and recognise their domains with
//! [`OwnerMark`] and [`parse_mark`] / [`parse_metadata_reply`].

mod domain_values;
pub mod domain_xml;
mod ownership_mark;
pub mod seed_iso;
pub mod vendor_data;

pub use domain_values::{
    BootFirmware, MAX_MEMORY_MIB, MAX_VCPUS, MacAddress, MachineName, MemoryMib, Vcpus, disk_path,
};
pub use domain_xml::DomainSpec;
pub use ownership_mark::{
    MARK_ELEMENT, MARK_NAMESPACE, MAX_DOCUMENT_LEN, MAX_TAGS_LEN, OwnerMark, parse_mark,
    parse_metadata_reply, stored_tags,
};
pub use seed_iso::SeedSpec;

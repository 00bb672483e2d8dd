//! What a guest is made of, built as pure functions: domain XML, the ownership mark, the seed ISO and its vendor data.

pub mod domain_values;
pub mod domain_xml;
pub mod ownership_mark;
pub mod seed_iso;
pub mod vendor_data;

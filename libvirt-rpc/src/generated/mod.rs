//! What `cargo xtask codegen libvirt-rpc` generates from libvirt's
//! protocol files and API descriptions (each file says so in its header;
//! none is edited by hand). `status.md` is the procedure table in the
//! crate docs.

pub(crate) mod calls;
pub mod flags;
pub mod limits;
pub mod params;
pub mod proc_num;
#[cfg(feature = "testing")]
pub(crate) mod sweep;
pub mod types;

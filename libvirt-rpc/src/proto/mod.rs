//! The sans-IO core: XDR, packet framing, message and error payloads,
//! keepalive state. Nothing in here performs IO or knows about tokio; the
//! connection driver feeds it bytes and clock readings.

pub mod keepalive;
pub mod packet;
pub mod remote_error;
pub mod types;
pub mod xdr;

//! Decoding reserves no more memory than the input holds: a list's declared
//! length is checked against the bytes left (4 per element), but an
//! element's in-memory size can be many times that (a `DomainInterface` is
//! 72 bytes), so the up-front reservation must be bounded by the input too.
//! An instrumented allocator (this test binary's own) counts the bytes
//! allocated while decoding.
//!
//! A test binary of its own, not a module of `tests/it` or `tests/offline`:
//! the global allocator is per binary, and other tests' allocations on
//! other threads would count in its region.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;

use libvirt_rpc::DomainInterface;
use libvirt_rpc::proto::xdr::from_bytes;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[test]
fn a_long_list_that_fails_early_reserves_at_most_the_input() {
    // A list declaring as many elements as 4 MiB could hold at 4 bytes each,
    // whose first element is already malformed (an optional's discriminant
    // of 7).
    let payload_len = 4 << 20;
    let count = (payload_len - 4) / 4;
    let mut payload = Vec::with_capacity(payload_len);
    payload.extend_from_slice(&(count as u32).to_be_bytes());
    payload.extend_from_slice(&0u32.to_be_bytes()); // name: ""
    payload.extend_from_slice(&7u32.to_be_bytes()); // hwaddr: invalid
    payload.resize(payload_len, 0);

    let region = Region::new(GLOBAL);
    let r = from_bytes::<Vec<DomainInterface>>(&payload);
    let allocated = region.change().bytes_allocated;
    assert!(r.is_err());
    assert!(
        allocated <= payload_len,
        "decoding allocated {allocated} bytes for {payload_len} bytes of input"
    );
}

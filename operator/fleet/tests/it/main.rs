//! fleet's integration tests, one binary: checks that keep the crate's
//! promises true (no IO, a doc section per condition reason), a module per
//! subject. None needs the sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod sans_io;
mod troubleshooting_doc;

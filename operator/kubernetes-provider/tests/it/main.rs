//! The kubernetes provider against the sandbox's real API server and node:
//! Pods running the sandbox's Squid image, CONNECTs through them, and the
//! ownership rules. Needs `cargo xtask test` (the sandbox with its node).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod events;
mod pods;

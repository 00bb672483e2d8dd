//! provider-api's integration tests, one binary: the decorators and the
//! registry over a scripted fake provider (`fake`), and the sample config.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod decorators;
mod fake;
mod registry;
mod sample_config;

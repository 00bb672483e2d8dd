//! The integration tests (against the sandbox's sshd and sshd instances of
//! their own): one test binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod dial_errors;
mod examples;
mod forward;
mod host_certs;
mod host_key_order;
mod jumps;
mod keys;
mod libvirt;
mod package;
mod support;
mod teardown;
mod user_config;

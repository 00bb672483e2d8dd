//! The integration tests that use the sandbox or a daemon of their own, and
//! the packaging check: one test binary (left out of the published crate,
//! as it needs the workspace-only test kit).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod connect_uri;
mod daemon_failure;
mod domain_streams;
mod event_kinds;
mod events;
mod examples;
mod link;
mod package;
mod polkit;
mod procedures;
mod reconnect;
mod smoke;
mod ssh;
mod streams;
mod support;
mod sweep;
mod tcp;
mod tls;
mod uri;

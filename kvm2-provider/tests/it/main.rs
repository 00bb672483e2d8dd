//! kvm2-provider's integration tests, one binary: a module per subject,
//! most against the sandbox (real libvirtd, sshd and guest network), the
//! rest offline (HTTP image source, seed ISO and vendor data tools, the
//! sample config). Shared helpers: `http_server` (a scripted image server),
//! `sandbox_hosts` (the sandbox as configured hosts, marked QEMU domains),
//! `provider_env` (a provider over the sandbox with clean-up) and
//! `test_domain` (the domain spec tests define without the provider); the
//! rest comes from `testkit`.
//! (`tests/user_data_logs_sandbox.rs` is a binary of its own: see there.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod check_sandbox;
mod create_frozen_link_sandbox;
mod dead_link_sandbox;
mod domain_xml_libvirt;
mod frozen_link_sandbox;
mod get_list_sandbox;
mod guest_e2e_sandbox;
mod host_table_sandbox;
mod http_server;
mod image_cache_sandbox;
mod image_pipeline_sandbox;
mod image_source_http;
mod instance_events_sandbox;
mod instance_fields_sandbox;
mod lifecycle_sandbox;
mod placement_sandbox;
mod provider_env;
mod provider_read_sandbox;
mod sample_config;
mod sandbox_hosts;
mod seed_iso_isoinfo;
mod shared_host_sandbox;
mod state_test_driver;
mod test_domain;
mod vendor_data_tools;
mod volume_xml_libvirt;

//! The integration tests that need no libvirtd and nothing from the
//! workspace: one binary, shipped in the published crate (`include` in
//! Cargo.toml), so it builds without the workspace-only test kit.
//! (`decode_allocation` is a binary of its own: it installs a counting
//! global allocator.)

mod captured;
mod events;
mod fake_daemon;
mod testing_kit;

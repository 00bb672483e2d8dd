//! The provider contract of the egress-proxies operator.
//!
//! This crate will own: the `Provider` and `Checker` traits, request and
//! instance types, the error type with its retry classes, the providers
//! config file with strict validation, the provider registry and the
//! metrics/tracing decorators.
//!
//! It is traits and plain data: no libvirt, SSH or Kubernetes dependency.

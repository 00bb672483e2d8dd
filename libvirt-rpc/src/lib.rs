//! Pure-Rust async client for libvirt's remote wire protocol.
//!
//! This crate will own:
//! - a sans-IO core (no tokio): the XDR codec, packet header and framing,
//!   message types and libvirt's error payload as a typed error;
//! - a connection driver over any `AsyncRead + AsyncWrite`: a cheap cloneable
//!   `Client` and one connection task that owns the socket, multiplexes calls
//!   by serial, answers keepalives and detects a dead link;
//! - typed procedures, abort-safe upload/download streams and domain events.
//!
//! It deliberately knows nothing about SSH, providers or Kubernetes.

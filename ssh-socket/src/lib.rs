//! Reach a remote unix socket (libvirt's, by default) over SSH.
//!
//! This crate will own: dialing a host with russh (typed errors per dial
//! stage, known_hosts verification, a private key re-read on every dial),
//! forwarding a `direct-streamlocal` channel as an `AsyncRead + AsyncWrite`
//! socket, keepalive, and a teardown that returns in bounded time whatever the
//! network does.
//!
//! It deliberately knows nothing about libvirt, providers or Kubernetes.

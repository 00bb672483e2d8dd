//! The kvm2 provider: egress-proxy VMs on libvirt/KVM hosts reached over SSH.
//!
//! This crate will own: the per-host connection table (libvirt-rpc over
//! ssh-socket), the base image cache, cloud-init seed ISOs, domain XML, the
//! domain lifecycle (create, get, delete, list-by-tag) and host health checks.
//!
//! It knows libvirt, SSH, HTTP, ISO and XML, and nothing of Kubernetes.

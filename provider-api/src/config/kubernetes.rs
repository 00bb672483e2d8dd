//! The validated `kubernetes` block of a provider entry: each proxy a Pod
//! running Squid, in a namespace of a cluster the entry names.

use std::collections::BTreeMap;

use super::kvm2::{Kvm2Defaults, ProxySettings, lookup};
use super::values::{AbsolutePath, ByteSize, ImageReference, MilliCpu};
use crate::error::Error;
use crate::ident::Identifier;

/// The `kubernetes` block: proxies as Pods.
///
/// Built only by [`ProvidersConfig`](super::ProvidersConfig) parsing: at
/// least one image and machine type, defaults naming existing keys.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KubernetesConfig {
    /// The namespace the Pods (and their configuration Secrets) live in;
    /// also the `host` part of the entry's provider IDs.
    pub namespace: Identifier,
    /// A kubeconfig file for the cluster (typically a Secret mounted into
    /// the operator's pod, re-read whenever the provider connects); `None`:
    /// the cluster the operator runs in (its ServiceAccount), or outside a
    /// cluster the usual `KUBECONFIG` lookup.
    pub kubeconfig_file: Option<AbsolutePath>,
    /// Squid container images by key (never empty).
    pub images: BTreeMap<Identifier, PodImage>,
    /// Pod sizes by name (never empty).
    pub machine_types: BTreeMap<Identifier, PodResources>,
    /// The Squid settings each Pod's configuration is rendered from.
    pub proxy: ProxySettings,
    /// What a request that names no machine type or image gets.
    pub defaults: Kvm2Defaults,
}

/// `kubernetes.images.<key>`: a Squid image (Debian's `squid` package,
/// running as the `proxy` user, uid 13; `cargo xtask squid-image` builds
/// one).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PodImage {
    /// Where the node pulls it from.
    pub reference: ImageReference,
}

/// `kubernetes.machine_types.<name>`: a Pod's resources (requests and
/// limits alike: the Pod's QoS class is `Guaranteed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PodResources {
    /// CPU.
    pub cpu: MilliCpu,
    /// Memory, within [`POD_MEMORY_MIN`]..=[`POD_MEMORY_MAX`].
    pub memory: ByteSize,
}

impl PodImage {
    /// An image from its reference (the config builds them from YAML).
    pub fn new(reference: ImageReference) -> Self {
        PodImage { reference }
    }
}

impl PodResources {
    /// Resources from their parts (the config builds them from YAML).
    pub fn new(cpu: MilliCpu, memory: ByteSize) -> Self {
        PodResources { cpu, memory }
    }
}

/// The least memory a Pod may have (64 MiB: Squid alone takes about 40).
pub const POD_MEMORY_MIN: ByteSize = ByteSize::from_bytes(64 * ByteSize::MIB);
/// The most memory a Pod may have (1 TiB).
pub const POD_MEMORY_MAX: ByteSize = ByteSize::from_bytes(ByteSize::TIB);

impl KubernetesConfig {
    /// The machine type a request asks for: `requested`, or the default.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when the name is unknown,
    /// or nothing was requested and no default is configured.
    pub fn machine_type_for(
        &self,
        requested: Option<&Identifier>,
    ) -> Result<(&Identifier, &PodResources), Error> {
        lookup(
            &self.machine_types,
            requested,
            self.defaults.machine_type.as_ref(),
            "machine type",
        )
    }

    /// The image a request asks for: `requested`, or the default.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when the key is unknown,
    /// or nothing was requested and no default is configured.
    pub fn image_for(
        &self,
        requested: Option<&Identifier>,
    ) -> Result<(&Identifier, &PodImage), Error> {
        lookup(
            &self.images,
            requested,
            self.defaults.image.as_ref(),
            "image",
        )
    }
}

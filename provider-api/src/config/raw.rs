//! The providers config as written: serde structs that reject unknown
//! fields but keep every value as written (strings, wide integers), so the
//! validator can name the field path and the rule for each problem.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub providers: Option<Vec<RawProvider>>,
}

/// One provider entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProvider {
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub provider_type: Option<String>,
    pub kvm2: Option<RawKvm2>,
    pub kubernetes: Option<RawKubernetes>,
}

/// The kubernetes block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKubernetes {
    pub namespace: Option<String>,
    pub kubeconfig_file: Option<String>,
    pub images: Option<Entries<RawPodImage>>,
    pub machine_types: Option<Entries<RawPodResources>>,
    pub proxy: Option<RawProxy>,
    pub defaults: Option<RawDefaults>,
}

/// `kubernetes.images.<key>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPodImage {
    pub reference: Option<String>,
}

/// `kubernetes.machine_types.<name>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPodResources {
    pub cpu: Option<String>,
    pub memory: Option<String>,
}

/// The kvm2 block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKvm2 {
    pub ssh: Option<RawSsh>,
    pub hosts: Option<Vec<RawHost>>,
    pub images: Option<Entries<RawImage>>,
    pub machine_types: Option<Entries<RawMachineType>>,
    pub firmware: Option<String>,
    pub domain_type: Option<String>,
    pub proxy: Option<RawProxy>,
    pub defaults: Option<RawDefaults>,
}

/// `kvm2.ssh`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSsh {
    pub user: Option<String>,
    pub key_file: Option<String>,
    pub known_hosts_file: Option<String>,
    pub insecure_ignore_host_key: Option<bool>,
}

/// `kvm2.hosts[i]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub name: Option<String>,
    pub address: Option<String>,
    pub port: Option<i64>,
    pub bridge: Option<String>,
    pub pool: Option<String>,
    pub socket: Option<String>,
    pub max_instances: Option<i64>,
    pub reserved_memory: Option<String>,
    pub jump: Option<Vec<RawJump>>,
}

/// `kvm2.hosts[i].jump[j]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawJump {
    pub address: Option<String>,
    pub port: Option<i64>,
    pub user: Option<String>,
}

/// `kvm2.images.<key>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawImage {
    pub url: Option<String>,
    pub sha256: Option<String>,
    pub format: Option<String>,
}

/// `kvm2.machine_types.<name>`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMachineType {
    pub vcpus: Option<i64>,
    pub memory: Option<String>,
    pub disk: Option<String>,
}

/// `kvm2.defaults`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDefaults {
    pub machine_type: Option<String>,
    pub image: Option<String>,
}

/// `kvm2.proxy`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProxy {
    pub port: Option<i64>,
    pub allowed_clients: Option<Vec<String>>,
    pub allowed_destinations: Option<Vec<String>>,
    pub credentials_file: Option<String>,
    pub probe_target: Option<String>,
}

/// A YAML mapping kept in document order *with* repeated keys, so the
/// validator can report a duplicate by path (the parser runs with
/// duplicate keys passed through).
#[derive(Debug)]
pub(crate) struct Entries<V>(pub Vec<(String, V)>);

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EntriesVisitor<V>(PhantomData<V>);

        impl<'de, V: Deserialize<'de>> Visitor<'de> for EntriesVisitor<V> {
            type Value = Entries<V>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a mapping")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<V>, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    out.push((k, v));
                }
                Ok(Entries(out))
            }
        }

        d.deserialize_map(EntriesVisitor(PhantomData))
    }
}

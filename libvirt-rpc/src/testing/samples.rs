//! The handles a sweep passes to methods that take one.

use crate::remote::{
    Domain, DomainCheckpoint, DomainSnapshot, Interface, Network, NetworkPort, NodeDevice,
    Nwfilter, NwfilterBinding, Secret, StoragePool, StorageVol,
};

/// One handle of each kind for [`sweep`](crate::testing::sweep): the
/// caller fills in the ones its daemon has (looked up, so they are real)
/// and leaves the rest at [`Samples::default`] (empty names, zero UUIDs:
/// objects no daemon has).
#[derive(Debug, Clone)]
pub struct Samples {
    /// A domain.
    pub domain: Domain,
    /// A storage pool.
    pub storage_pool: StoragePool,
    /// A volume.
    pub storage_vol: StorageVol,
    /// A network.
    pub network: Network,
    /// A network port.
    pub network_port: NetworkPort,
    /// A host interface.
    pub interface: Interface,
    /// A host device.
    pub node_device: NodeDevice,
    /// A secret.
    pub secret: Secret,
    /// A network filter.
    pub nwfilter: Nwfilter,
    /// A network filter binding.
    pub nwfilter_binding: NwfilterBinding,
    /// A domain snapshot.
    pub domain_snapshot: DomainSnapshot,
    /// A domain checkpoint.
    pub domain_checkpoint: DomainCheckpoint,
}

impl Default for Samples {
    /// Handles of objects no daemon has: empty names, zero UUIDs.
    fn default() -> Self {
        let domain = Domain {
            name: String::new(),
            uuid: [0; 16],
            id: -1,
        };
        let network = Network {
            name: String::new(),
            uuid: [0; 16],
        };
        Samples {
            storage_pool: StoragePool {
                name: String::new(),
                uuid: [0; 16],
            },
            storage_vol: StorageVol {
                pool: String::new(),
                name: String::new(),
                key: String::new(),
            },
            network_port: NetworkPort {
                net: network.clone(),
                uuid: [0; 16],
            },
            network,
            interface: Interface {
                name: String::new(),
                mac: String::new(),
            },
            node_device: NodeDevice {
                name: String::new(),
            },
            secret: Secret {
                uuid: [0; 16],
                usage_type: 0,
                usage_id: String::new(),
            },
            nwfilter: Nwfilter {
                name: String::new(),
                uuid: [0; 16],
            },
            nwfilter_binding: NwfilterBinding {
                portdev: String::new(),
                filtername: String::new(),
            },
            domain_snapshot: DomainSnapshot {
                name: String::new(),
                dom: domain.clone(),
            },
            domain_checkpoint: DomainCheckpoint {
                name: String::new(),
                dom: domain.clone(),
            },
            domain,
        }
    }
}

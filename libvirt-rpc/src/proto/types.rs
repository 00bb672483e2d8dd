//! Object handles as they travel on the wire (`remote_nonnull_*`,
//! generated into [`crate::remote`] and re-exported here), with helpers.

pub use crate::remote::{Domain, Network, NodeDevice, Secret, StoragePool, StorageVol};

/// A UUID as 16 raw bytes (`remote_uuid`).
pub type Uuid = [u8; 16];

impl Domain {
    /// The UUID in its usual text form.
    pub fn uuid_string(&self) -> String {
        uuid_to_string(&self.uuid)
    }
}

impl StoragePool {
    /// The UUID in its usual text form.
    pub fn uuid_string(&self) -> String {
        uuid_to_string(&self.uuid)
    }
}

/// Formats a UUID as `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn uuid_to_string(u: &Uuid) -> String {
    let mut s = String::with_capacity(36);
    for (i, b) in u.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn domain_round_trips(name in ".{0,20}", uuid: [u8; 16], id: i32) {
            let d = Domain { name, uuid, id };
            prop_assert_eq!(from_bytes::<Domain>(&to_bytes(&d).unwrap()).unwrap(), d);
        }
        #[test]
        fn pool_round_trips(name in ".{0,20}", uuid: [u8; 16]) {
            let p = StoragePool { name, uuid };
            prop_assert_eq!(from_bytes::<StoragePool>(&to_bytes(&p).unwrap()).unwrap(), p);
        }
        #[test]
        fn network_round_trips(name in ".{0,20}", uuid: [u8; 16]) {
            let n = Network { name, uuid };
            prop_assert_eq!(from_bytes::<Network>(&to_bytes(&n).unwrap()).unwrap(), n);
        }
        #[test]
        fn node_device_round_trips(name in ".{0,20}") {
            let d = NodeDevice { name };
            prop_assert_eq!(from_bytes::<NodeDevice>(&to_bytes(&d).unwrap()).unwrap(), d);
        }
        #[test]
        fn secret_round_trips(uuid: [u8; 16], usage_type: i32, usage_id in ".{0,20}") {
            let s = Secret { uuid, usage_type, usage_id };
            prop_assert_eq!(from_bytes::<Secret>(&to_bytes(&s).unwrap()).unwrap(), s);
        }
        #[test]
        fn vol_round_trips(pool in ".{0,20}", name in ".{0,20}", key in ".{0,20}") {
            let v = StorageVol { pool, name, key };
            prop_assert_eq!(from_bytes::<StorageVol>(&to_bytes(&v).unwrap()).unwrap(), v);
        }
    }

    #[test]
    fn uuid_formats() {
        let u = [0x12u8; 16];
        assert_eq!(uuid_to_string(&u), "12121212-1212-1212-1212-121212121212");
    }
}

//! libvirt's error payload (`virNetMessageError` / `remote_error`).

use super::types::{Domain, Network};
use crate::xdr_struct;

xdr_struct! {
    /// The error payload of a REPLY or STREAM packet with status ERROR.
    pub struct WireError {
        /// `virErrorNumber`.
        pub code: i32,
        /// `virErrorDomain`: the subsystem that raised the error.
        pub domain: i32,
        /// Human-readable message.
        pub message: Option<String>,
        /// `virErrorLevel` (1 warning, 2 error).
        pub level: i32,
        /// Unused by current daemons.
        pub dom: Option<Domain>,
        /// Extra string information.
        pub str1: Option<String>,
        /// Extra string information.
        pub str2: Option<String>,
        /// Extra string information.
        pub str3: Option<String>,
        /// Extra number information.
        pub int1: i32,
        /// Extra number information.
        pub int2: i32,
        /// Unused by current daemons.
        pub net: Option<Network>,
    }
}

impl WireError {
    /// An error with just a code, domain and message (what a client sends
    /// to abort a stream).
    pub fn new(code: i32, domain: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            domain,
            message: Some(message.into()),
            level: 2,
            dom: None,
            str1: None,
            str2: None,
            str3: None,
            int1: 0,
            int2: 0,
            net: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::xdr::{from_bytes, to_bytes};
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn wire_error_round_trips(code: i32, domain: i32, message: Option<String>, level: i32,
                                  str1: Option<String>, int1: i32, int2: i32,
                                  dom_name in proptest::option::of(".{0,8}")) {
            let e = WireError {
                code, domain, message, level,
                dom: dom_name.map(|name| Domain { name, uuid: [7; 16], id: -1 }),
                str1, str2: None, str3: Some("x".into()), int1, int2,
                net: Some(Network { name: "n".into(), uuid: [1; 16] }),
            };
            prop_assert_eq!(from_bytes::<WireError>(&to_bytes(&e).unwrap()).unwrap(), e);
        }
    }
}

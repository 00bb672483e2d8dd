//! libvirt failures → provider-API error classes.
//!
//! The reconciler decides what to do from the class alone, so this table is
//! where a libvirt failure acquires its meaning. The rule: **Permanent** only
//! when repeating the same call cannot succeed until configuration or the
//! request changes; **NotFound** only for "no such domain / volume /
//! metadata"; everything else — dead links, timeouts, busy daemons, and codes
//! this table does not know — is **Transient**.
//!
//! **One meaning of "not found".** libvirt-rpc's `Error::is_not_found` is
//! the daemon's word that *some* object is missing — a pool or network
//! included. Here a missing pool or network is the configuration naming
//! something the host lacks (Permanent), and only the object asked about
//! being gone is NotFound. So this crate never calls libvirt-rpc's
//! predicate: [`is_absent`] is the table's NotFound.
//!
//! Callers with more context override the table where the meaning depends
//! on the call: e.g. an address lookup wraps its failures as Transient
//! explicitly (invariant 8), because a guest-agent failure there means "not yet", not
//! "never".

use libvirt_rpc::{Error as RpcError, ErrorCode};
use provider_api::ErrorClass;

/// The class of a libvirt error code.
pub fn code_class(code: ErrorCode) -> ErrorClass {
    use ErrorClass::*;
    use ErrorCode as C;
    match code {
        // The object is gone (get: recreate; delete: done).
        C::NoDomain | C::NoStorageVol | C::NoDomainMetadata => NotFound,
        // Configuration names something the host does not have, or asks for
        // something it cannot do; the request or config must change.
        C::NoStoragePool
        | C::NoNetwork
        | C::NoInterface
        | C::NoSupport
        | C::OperationUnsupported
        | C::ConfigUnsupported
        | C::ArgumentUnsupported
        | C::InvalidArg
        | C::XmlError
        | C::XmlDetail
        | C::XmlInvalidSchema
        | C::OsType
        | C::InvalidMac
        | C::CpuIncompatible
        | C::NoSecurityModel
        | C::StorageProbeFailed
        | C::AuthFailed
        | C::AuthCancelled
        | C::AuthUnavailable
        | C::AccessDenied
        | C::OperationDenied => Permanent,
        // Internal and operation failures, timeouts, busy resources, agents
        // not answering yet, objects that appeared or changed state under a
        // concurrent call, dead connections, and anything newer.
        _ => Transient,
    }
}

/// The class of any libvirt-rpc failure.
pub fn classify(error: &RpcError) -> ErrorClass {
    match error {
        RpcError::Libvirt(e) => code_class(e.code),
        // Only NONE auth is implemented: the daemon's config must change.
        RpcError::UnsupportedAuth { .. } => ErrorClass::Permanent,
        // An argument over a protocol limit: the same call fails again.
        RpcError::Encode { .. } => ErrorClass::Permanent,
        // Dead link, deadline, a confused peer, a failed stream source or
        // sink: a new connection or a new attempt may succeed.
        _ => ErrorClass::Transient,
    }
}

/// True when `error` means the object asked about is gone (the table's
/// NotFound): what "already gone" and "none by that name" test. A missing
/// pool or network is not absence; it is Permanent.
pub fn is_absent(error: &RpcError) -> bool {
    classify(error) == ErrorClass::NotFound
}

/// Wraps a libvirt-rpc failure as a provider error: `context` is the message
/// (what was being done, on which host), the class comes from [`classify`],
/// and the libvirt error is kept as the source.
pub fn to_provider_error(context: impl Into<String>, error: RpcError) -> provider_api::Error {
    provider_api::Error::wrap(classify(&error), context, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libvirt-rpc's `is_not_found` counts a missing pool; the provider's
    /// one meaning does not (the config names a pool the host lacks).
    #[test]
    fn a_missing_pool_is_not_absence() {
        use libvirt_rpc::{LibvirtError, proto::remote_error::WireError};
        let err = |code: ErrorCode| {
            RpcError::from(LibvirtError::from(WireError::new(code.to_i32(), 0, "x")))
        };
        let pool = err(ErrorCode::NoStoragePool);
        assert!(pool.is_not_found(), "libvirt-rpc's meaning");
        assert!(!is_absent(&pool));
        assert_eq!(classify(&pool), ErrorClass::Permanent);
        for code in [
            ErrorCode::NoDomain,
            ErrorCode::NoStorageVol,
            ErrorCode::NoDomainMetadata,
        ] {
            assert!(is_absent(&err(code)), "{code:?}");
        }
    }
    use ErrorClass::*;
    use libvirt_rpc::LibvirtError;

    /// One row per code the provider meets or maps on purpose, by number
    /// (virterror.h), so a renumbering in libvirt-rpc would show here.
    const TABLE: &[(i32, ErrorClass)] = &[
        (1, Transient),    // InternalError
        (3, Permanent),    // NoSupport
        (5, Transient),    // NoConnect
        (6, Transient),    // InvalidConn
        (8, Permanent),    // InvalidArg
        (9, Transient),    // OperationFailed
        (16, Permanent),   // OsType
        (27, Permanent),   // XmlError
        (28, Transient),   // DomExist: a concurrent create; retry adopts it
        (29, Permanent),   // OperationDenied
        (35, Permanent),   // XmlDetail
        (38, Transient),   // SystemError
        (39, Transient),   // Rpc
        (42, NotFound),    // NoDomain
        (43, Permanent),   // NoNetwork
        (44, Permanent),   // InvalidMac
        (45, Permanent),   // AuthFailed
        (49, Permanent),   // NoStoragePool: the configured pool is missing
        (50, NotFound),    // NoStorageVol
        (54, Permanent),   // NoSecurityModel
        (55, Transient),   // OperationInvalid: e.g. state changed under us
        (57, Permanent),   // NoInterface
        (67, Permanent),   // ConfigUnsupported
        (68, Transient),   // OperationTimeout
        (74, Permanent),   // ArgumentUnsupported
        (75, Permanent),   // StorageProbeFailed
        (78, Transient),   // OperationAborted
        (79, Permanent),   // AuthCancelled
        (80, NotFound),    // NoDomainMetadata: no mark, a foreign domain
        (84, Permanent),   // OperationUnsupported
        (86, Transient),   // AgentUnresponsive: not up yet
        (87, Transient),   // ResourceBusy
        (88, Permanent),   // AccessDenied
        (90, Transient),   // StorageVolExist: a concurrent create
        (91, Permanent),   // CpuIncompatible
        (92, Permanent),   // XmlInvalidSchema
        (94, Permanent),   // AuthUnavailable
        (9999, Transient), // a code newer than this table
    ];

    #[test]
    fn libvirt_code_table() {
        for &(number, class) in TABLE {
            assert_eq!(
                code_class(ErrorCode::from_i32(number)),
                class,
                "code {number}"
            );
        }
    }

    #[test]
    fn non_daemon_failures() {
        let lv = RpcError::Libvirt(LibvirtError {
            code: ErrorCode::NoDomain,
            domain: 10,
            message: "Domain not found".into(),
            level: 2,
        });
        assert_eq!(classify(&lv), NotFound);
        let timeout = RpcError::Timeout {
            procedure: 1,
            after: std::time::Duration::from_secs(1),
        };
        assert_eq!(classify(&timeout), Transient);
        assert_eq!(
            classify(&RpcError::UnsupportedAuth { offered: vec![1] }),
            Permanent
        );
        let wrapped = to_provider_error("look up domain ep-1 on host1", lv);
        assert_eq!(wrapped.class(), NotFound);
        assert_eq!(wrapped.to_string(), "look up domain ep-1 on host1");
        assert!(std::error::Error::source(&wrapped).is_some());
    }
}

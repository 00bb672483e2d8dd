//! libvirt's protocol maxima (`REMOTE_*_MAX` in `remote_protocol.x`): the
//! `<N>` of variable-length declarations, enforced per field by
//! [`crate::xdr_struct!`] (`name<MAX>: Type`) in both directions.
//!
//! The values are those of libvirt 11 (the `.x` file is the authority; the
//! numbers are facts read from it). Only the maxima of the types this
//! crate declares are named here so far.

/// `REMOTE_STRING_MAX`: a `remote_nonnull_string` (the default of
/// `String`, [`super::xdr::STRING_MAX`]).
pub const REMOTE_STRING_MAX: usize = super::xdr::STRING_MAX;

/// `REMOTE_DOMAIN_LIST_MAX`: domains in one listing.
pub const REMOTE_DOMAIN_LIST_MAX: usize = 16_384;

/// `REMOTE_STORAGE_POOL_LIST_MAX`: storage pools in one listing.
pub const REMOTE_STORAGE_POOL_LIST_MAX: usize = 4_096;

/// `REMOTE_STORAGE_VOL_LIST_MAX`: volumes in one listing.
pub const REMOTE_STORAGE_VOL_LIST_MAX: usize = 16_384;

/// `REMOTE_AUTH_TYPE_LIST_MAX`: authentication types a daemon offers.
pub const REMOTE_AUTH_TYPE_LIST_MAX: usize = 20;

/// `REMOTE_DOMAIN_INTERFACE_MAX`: interfaces in one
/// `DomainInterfaceAddresses` reply.
pub const REMOTE_DOMAIN_INTERFACE_MAX: usize = 2_048;

/// `REMOTE_DOMAIN_IP_ADDR_MAX`: addresses of one interface.
pub const REMOTE_DOMAIN_IP_ADDR_MAX: usize = 2_048;

/// `REMOTE_NODE_CPU_STATS_MAX`: parameters of one `NodeGetCPUStats`.
pub const REMOTE_NODE_CPU_STATS_MAX: usize = 16;

/// `REMOTE_DOMAIN_SCHEDULER_PARAMETERS_MAX`: typed parameters of the
/// scheduler calls.
pub const REMOTE_DOMAIN_SCHEDULER_PARAMETERS_MAX: usize = 16;

/// `REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX`: typed parameters of the memory
/// tuning calls.
pub const REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX: usize = 16;

/// `REMOTE_CONNECT_GET_ALL_DOMAIN_STATS_MAX`: domains in one
/// `ConnectGetAllDomainStats` reply.
pub const REMOTE_CONNECT_GET_ALL_DOMAIN_STATS_MAX: usize = 4_096;

/// `REMOTE_DOMAIN_JOB_STATS_MAX`: typed parameters of one job's
/// statistics.
pub const REMOTE_DOMAIN_JOB_STATS_MAX: usize = 64;

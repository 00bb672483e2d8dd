//! libvirt's `virErrorNumber` as a Rust enum (from `include/libvirt/virterror.h`),
//! and the macro its siblings in [`crate::error_domain`] use too.

/// Declares a `#[non_exhaustive]` enum of libvirt's numbers with an
/// `Unknown(i32)` fallback for numbers newer than this crate, and the two
/// total conversions `from_i32` / `to_i32`.
macro_rules! wire_enum {
    ($(#[$em:meta])* $enum:ident { $($(#[$m:meta])* $name:ident = $n:literal,)* }) => {
        $(#[$em])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $enum {
            $($(#[$m])* $name,)*
            /// A number this crate does not know.
            Unknown(i32),
        }

        impl $enum {
            /// Maps the wire number to a code.
            pub fn from_i32(n: i32) -> Self {
                match n {
                    $($n => Self::$name,)*
                    other => Self::Unknown(other),
                }
            }

            /// The wire number.
            pub fn to_i32(self) -> i32 {
                match self {
                    $(Self::$name => $n,)*
                    Self::Unknown(n) => n,
                }
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum! {
/// libvirt's error number (`virErrorNumber`), with a fallback for
/// numbers newer than this crate.
ErrorCode {
    /// No error.
    Ok = 0,
    /// Internal error.
    InternalError = 1,
    /// Memory allocation failure.
    NoMemory = 2,
    /// No support for this function.
    NoSupport = 3,
    /// Could not resolve hostname.
    UnknownHost = 4,
    /// Cannot connect to hypervisor.
    NoConnect = 5,
    /// Invalid connection object.
    InvalidConn = 6,
    /// Invalid domain object.
    InvalidDomain = 7,
    /// Invalid function argument.
    InvalidArg = 8,
    /// A command to the hypervisor failed.
    OperationFailed = 9,
    /// An HTTP GET failed.
    GetFailed = 10,
    /// An HTTP POST failed.
    PostFailed = 11,
    /// Unexpected HTTP error code.
    HttpError = 12,
    /// Failure to serialise an S-expression.
    SexprSerial = 13,
    /// Could not open the Xen hypervisor control.
    NoXen = 14,
    /// Failure doing a hypervisor call.
    XenCall = 15,
    /// Unknown OS type.
    OsType = 16,
    /// Missing kernel information.
    NoKernel = 17,
    /// Missing root device information.
    NoRoot = 18,
    /// Missing source device information.
    NoSource = 19,
    /// Missing target device information.
    NoTarget = 20,
    /// Missing domain name information.
    NoName = 21,
    /// Missing domain OS information.
    NoOs = 22,
    /// Missing domain devices information.
    NoDevice = 23,
    /// Could not open Xen Store control.
    NoXenstore = 24,
    /// Too many drivers registered.
    DriverFull = 25,
    /// Not supported by the drivers (deprecated).
    CallFailed = 26,
    /// An XML description is not well formed or broken.
    XmlError = 27,
    /// The domain already exists.
    DomExist = 28,
    /// Operation forbidden on read-only connections.
    OperationDenied = 29,
    /// Failed to open a configuration file.
    OpenFailed = 30,
    /// Failed to read a configuration file.
    ReadFailed = 31,
    /// Failed to parse a configuration file.
    ParseFailed = 32,
    /// Failed to parse the syntax of a configuration file.
    ConfSyntax = 33,
    /// Failed to write a configuration file.
    WriteFailed = 34,
    /// Detail of an XML error.
    XmlDetail = 35,
    /// Invalid network object.
    InvalidNetwork = 36,
    /// The network already exists.
    NetworkExist = 37,
    /// General system call failure.
    SystemError = 38,
    /// Some sort of RPC error.
    Rpc = 39,
    /// Error from a GnuTLS call.
    GnutlsError = 40,
    /// Failed to start network.
    WarNoNetwork = 41,
    /// Domain not found or unexpectedly disappeared.
    NoDomain = 42,
    /// Network not found.
    NoNetwork = 43,
    /// Invalid MAC address.
    InvalidMac = 44,
    /// Authentication failed.
    AuthFailed = 45,
    /// Invalid storage pool object.
    InvalidStoragePool = 46,
    /// Invalid storage volume object.
    InvalidStorageVol = 47,
    /// Failed to start storage.
    WarNoStorage = 48,
    /// Storage pool not found.
    NoStoragePool = 49,
    /// Storage volume not found.
    NoStorageVol = 50,
    /// Failed to start node driver.
    WarNoNode = 51,
    /// Invalid node device object.
    InvalidNodeDevice = 52,
    /// Node device not found.
    NoNodeDevice = 53,
    /// Security model not found.
    NoSecurityModel = 54,
    /// Operation is not applicable at this time.
    OperationInvalid = 55,
    /// Failed to start interface driver.
    WarNoInterface = 56,
    /// Interface driver not running.
    NoInterface = 57,
    /// Invalid interface object.
    InvalidInterface = 58,
    /// More than one matching interface found.
    MultipleInterfaces = 59,
    /// Failed to start nwfilter driver.
    WarNoNwfilter = 60,
    /// Invalid nwfilter object.
    InvalidNwfilter = 61,
    /// Network filter pool not found.
    NoNwfilter = 62,
    /// Failed to build firewall.
    BuildFirewall = 63,
    /// Failed to start secret storage.
    WarNoSecret = 64,
    /// Invalid secret.
    InvalidSecret = 65,
    /// Secret not found.
    NoSecret = 66,
    /// Unsupported configuration construct.
    ConfigUnsupported = 67,
    /// Timeout occurred during operation.
    OperationTimeout = 68,
    /// Migration worked, but making the VM persistent failed.
    MigratePersistFailed = 69,
    /// A synchronous hook script failed.
    HookScriptFailed = 70,
    /// Invalid domain snapshot.
    InvalidDomainSnapshot = 71,
    /// Domain snapshot not found.
    NoDomainSnapshot = 72,
    /// Stream pointer not valid.
    InvalidStream = 73,
    /// Valid API use but unsupported by the given driver.
    ArgumentUnsupported = 74,
    /// Storage pool probe failed.
    StorageProbeFailed = 75,
    /// Storage pool already built.
    StoragePoolBuilt = 76,
    /// Force was not requested for a risky snapshot revert.
    SnapshotRevertRisky = 77,
    /// Operation on a domain was cancelled or aborted by the user.
    OperationAborted = 78,
    /// Authentication cancelled.
    AuthCancelled = 79,
    /// The metadata is not present.
    NoDomainMetadata = 80,
    /// Migration is not safe.
    MigrateUnsafe = 81,
    /// Integer overflow.
    Overflow = 82,
    /// Action prevented by a block copy job.
    BlockCopyActive = 83,
    /// The requested operation is not supported.
    OperationUnsupported = 84,
    /// Error in the SSH transport driver.
    Ssh = 85,
    /// Guest agent is unresponsive, not running or not usable.
    AgentUnresponsive = 86,
    /// Resource is already in use.
    ResourceBusy = 87,
    /// Operation on the object or resource was denied.
    AccessDenied = 88,
    /// Error from a D-Bus service.
    DbusService = 89,
    /// The storage volume already exists.
    StorageVolExist = 90,
    /// Given CPU is incompatible with the host CPU.
    CpuIncompatible = 91,
    /// XML document does not validate against the schema.
    XmlInvalidSchema = 92,
    /// Finish API succeeded but is expected to return NULL.
    MigrateFinishOk = 93,
    /// Authentication unavailable.
    AuthUnavailable = 94,
    /// Server was not found.
    NoServer = 95,
    /// Client was not found.
    NoClient = 96,
    /// Guest agent replied with a wrong id to guest-sync (deprecated).
    AgentUnsynced = 97,
    /// Error in the libssh transport driver.
    Libssh = 98,
    /// Failed to find the desired device.
    DeviceMissing = 99,
    /// Invalid nwfilter binding.
    InvalidNwfilterBinding = 100,
    /// No nwfilter binding.
    NoNwfilterBinding = 101,
    /// Invalid domain checkpoint.
    InvalidDomainCheckpoint = 102,
    /// Domain checkpoint not found.
    NoDomainCheckpoint = 103,
    /// Domain backup job id not found.
    NoDomainBackup = 104,
    /// Invalid network port object.
    InvalidNetworkPort = 105,
    /// The network port already exists.
    NetworkPortExist = 106,
    /// Network port not found.
    NoNetworkPort = 107,
    /// No domain hostname found.
    NoHostname = 108,
    /// Checkpoint cannot be used.
    CheckpointInconsistent = 109,
    /// More than one matching domain found.
    MultipleDomains = 110,
    /// Network metadata is not present.
    NoNetworkMetadata = 111,
}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_unknown_falls_back() {
        for n in -3..200 {
            assert_eq!(ErrorCode::from_i32(n).to_i32(), n);
        }
        assert_eq!(ErrorCode::from_i32(42), ErrorCode::NoDomain);
        assert_eq!(ErrorCode::from_i32(50), ErrorCode::NoStorageVol);
        assert_eq!(ErrorCode::from_i32(86), ErrorCode::AgentUnresponsive);
        assert_eq!(ErrorCode::from_i32(999), ErrorCode::Unknown(999));
    }
}

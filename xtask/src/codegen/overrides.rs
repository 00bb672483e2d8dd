//! The hand-kept exceptions to the generator's rules, each with its reason.
//! Everything not named here follows the rules in `emit/mod.rs`.

/// `.x` types not generated: a hand-written type with more to offer takes
/// their place (its path inside libvirt-rpc).
pub const HAND_TYPES: &[(&str, &str, &str)] = &[
    (
        "remote_typed_param",
        "crate::proto::typed_param::TypedParam",
        "constructors and typed accessors (`TypedParam::new`, `as_u64`, ...)",
    ),
    (
        "remote_typed_param_value",
        "crate::proto::typed_param::TypedParamValue",
        "`From` conversions from Rust values",
    ),
    (
        "remote_error",
        "crate::proto::remote_error::WireError",
        "the error payload every REPLY and STREAM may carry, read by the connection itself (`WireError::new` builds a stream's abort); one type, not two",
    ),
];

/// Generated types named other than the rule (`remote_x_y_ret` →
/// `XYRet`) would name them: the names the crate used before generation,
/// kept for its users.
pub const TYPE_NAMES: &[(&str, &str, &str)] = &[
    (
        "remote_domain_get_state_ret",
        "DomainStateInfo",
        "the name kvm2-provider uses",
    ),
    (
        "remote_domain_get_info_ret",
        "DomainInfo",
        "the name kvm2-provider uses",
    ),
    (
        "remote_storage_pool_get_info_ret",
        "StoragePoolInfo",
        "the name kvm2-provider uses",
    ),
    (
        "remote_storage_vol_get_info_ret",
        "StorageVolInfo",
        "the name kvm2-provider uses",
    ),
];

/// Struct fields with a typed Rust type instead of the wire's integer.
pub const FIELD_TYPES: &[(&str, &str, &str, &str)] = &[
    (
        "remote_domain_get_state_ret",
        "state",
        "crate::domain_state::DomainState",
        "`virDomainState`, typed (the reason's type depends on it: `state_reason()`)",
    ),
    (
        "remote_domain_get_info_ret",
        "state",
        "crate::domain_state::DomainState",
        "`virDomainState`, typed (an `unsigned char` on the wire, one word like an `int`)",
    ),
];

/// Parameters with a typed Rust type the API description does not name as
/// a flags enum.
pub const PARAM_TYPES: &[(&str, &str, &str, &str)] = &[
    (
        "REMOTE_PROC_CONNECT_OPEN",
        "flags",
        "crate::flags::OpenFlags",
        "`virConnectFlags` (the hand-kept `OpenFlags`, which URIs set); the procedure's own C function (`virConnectOpen`) has none",
    ),
    (
        "REMOTE_PROC_DOMAIN_GET_METADATA",
        "type",
        "crate::flags::MetadataType",
        "`virDomainMetadataType`, an enum rather than flags",
    ),
    (
        "REMOTE_PROC_DOMAIN_SET_METADATA",
        "type",
        "crate::flags::MetadataType",
        "`virDomainMetadataType`, an enum rather than flags",
    ),
    (
        "REMOTE_PROC_DOMAIN_INTERFACE_ADDRESSES",
        "source",
        "crate::flags::InterfaceAddressesSource",
        "`virDomainInterfaceAddressesSource`, an enum rather than flags",
    ),
    (
        "REMOTE_PROC_CONNECT_SUPPORTS_FEATURE",
        "feature",
        "crate::domain_state::DrvFeature",
        "`virDrvFeature`, an enum of libvirt's internal features",
    ),
];

/// Return values mapped further than unwrapping a single field.
pub const RETURNS: &[(&str, &str, &str, &str)] = &[(
    "REMOTE_PROC_CONNECT_SUPPORTS_FEATURE",
    "|r| r.supported != 0",
    "bool",
    "the daemon answers 0 or 1",
)];

/// Count arguments that stay parameters although the rule would hide them
/// (an argument `nparams`/`max*` beside a reply with one bounded list is
/// otherwise sent as the list's maximum).
pub const KEEP_PARAMS: &[(&str, &str, &str)] = &[(
    "REMOTE_PROC_DOMAIN_GET_CPU_STATS",
    "nparams",
    "the daemon bounds nparams × ncpus together, so the caller chooses both",
)];

/// Procedures with no method, and why.
pub const NO_METHOD: &[(&str, &str)] = &[
    (
        "REMOTE_PROC_DOMAIN_OPEN_GRAPHICS",
        "passes a file descriptor over the unix socket (SCM_RIGHTS), which this client does not send",
    ),
    (
        "REMOTE_PROC_DOMAIN_OPEN_GRAPHICS_FD",
        "returns a file descriptor over the unix socket (SCM_RIGHTS), which this client does not receive",
    ),
    (
        "REMOTE_PROC_DOMAIN_FD_ASSOCIATE",
        "passes file descriptors over the unix socket (SCM_RIGHTS), which this client does not send",
    ),
    (
        "LXC_PROC_DOMAIN_OPEN_NAMESPACE",
        "returns file descriptors over the unix socket (SCM_RIGHTS), which this client does not receive",
    ),
    (
        "REMOTE_PROC_AUTH_SASL_INIT",
        "SASL authentication is not supported (`connect_uri` refuses it with a typed error)",
    ),
    (
        "REMOTE_PROC_AUTH_SASL_START",
        "SASL authentication is not supported (`connect_uri` refuses it with a typed error)",
    ),
    (
        "REMOTE_PROC_AUTH_SASL_STEP",
        "SASL authentication is not supported (`connect_uri` refuses it with a typed error)",
    ),
];

/// Stream procedures whose direction the `.x` annotations do not tell
/// (`@readstream` means the daemon sends, `@writestream` the client):
/// procedure, `upload` / `download` / `duplex`, why.
pub const STREAM_KINDS: &[(&str, &str, &str)] = &[
    (
        "REMOTE_PROC_DOMAIN_OPEN_CONSOLE",
        "duplex",
        "a console carries keystrokes to the guest as well; the `.x` annotates only the read side",
    ),
    (
        "REMOTE_PROC_DOMAIN_OPEN_CHANNEL",
        "duplex",
        "a channel carries data both ways; the `.x` annotates only the read side",
    ),
    (
        "REMOTE_PROC_DOMAIN_MIGRATE_PREPARE_TUNNEL3_PARAMS",
        "upload",
        "opens the same write stream as PREPARE_TUNNEL3, but libvirt writes its client side by hand (`@generate: none`) and the `.x` leaves it unannotated",
    ),
];

/// Streams wired to the hand-written stream API.
pub const STREAM_METHODS: &[(&str, &str)] = &[
    ("REMOTE_PROC_STORAGE_VOL_UPLOAD", "storage_vol_upload"),
    ("REMOTE_PROC_STORAGE_VOL_DOWNLOAD", "storage_vol_download"),
];

/// Constants the `.x` files take from libvirt's C headers.
pub const C_CONSTANTS: &[(&str, i64)] = &[
    ("VIR_UUID_BUFLEN", 16),
    ("VIR_SECURITY_MODEL_BUFLEN", 257),
    ("VIR_SECURITY_LABEL_BUFLEN", 4097),
    ("VIR_SECURITY_DOI_BUFLEN", 257),
    ("VIR_TYPED_PARAM_INT", 1),
    ("VIR_TYPED_PARAM_UINT", 2),
    ("VIR_TYPED_PARAM_LLONG", 3),
    ("VIR_TYPED_PARAM_ULLONG", 4),
    ("VIR_TYPED_PARAM_DOUBLE", 5),
    ("VIR_TYPED_PARAM_BOOLEAN", 6),
    ("VIR_TYPED_PARAM_STRING", 7),
];

/// Looks a key up in a table whose first column is the key.
pub fn find<T>(table: &[T], key: impl Fn(&T) -> bool) -> Option<&T> {
    table.iter().find(|row| key(row))
}

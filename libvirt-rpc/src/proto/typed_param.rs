//! libvirt's typed parameters (`virTypedParameter`): named values of one of
//! seven types, the payload of stats, tuning, migration and job calls
//! (`remote_typed_param` and its union `remote_typed_param_value` in
//! `remote_protocol.x`).
//!
//! On the wire a parameter is its field name (a `remote_nonnull_string`),
//! then the value's type (`virTypedParameterType`, an `int`), then the
//! value. A type this crate does not know is
//! [`XdrError::UnknownDiscriminant`](super::xdr::XdrError::UnknownDiscriminant)
//! — as libvirt's own client refuses it. Lists of parameters are
//! `Vec<TypedParam>` fields whose maximum is the procedure's
//! (`params<REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX>: Vec<TypedParam>`).

use crate::{xdr_struct, xdr_union};

xdr_union! {
    /// A typed parameter's value (`remote_typed_param_value`), by its
    /// `virTypedParameterType`.
    ///
    /// Equality is `f64`'s for [`TypedParamValue::Double`]: a NaN equals
    /// nothing, `0.0` equals `-0.0`; the encoding keeps every bit.
    pub enum TypedParamValue switch (i32) {
        /// `VIR_TYPED_PARAM_INT` (1): `int`.
        Int(i32) = TypedParamValue::INT,
        /// `VIR_TYPED_PARAM_UINT` (2): `unsigned int`.
        UInt(u32) = TypedParamValue::UINT,
        /// `VIR_TYPED_PARAM_LLONG` (3): `hyper`.
        LLong(i64) = TypedParamValue::LLONG,
        /// `VIR_TYPED_PARAM_ULLONG` (4): `unsigned hyper`.
        ULLong(u64) = TypedParamValue::ULLONG,
        /// `VIR_TYPED_PARAM_DOUBLE` (5): `double`.
        Double(f64) = TypedParamValue::DOUBLE,
        /// `VIR_TYPED_PARAM_BOOLEAN` (6): an `int` that is 0 or 1 (libvirt
        /// sends a C `bool`; any other word is refused as
        /// [`XdrError::Invalid`](super::xdr::XdrError::Invalid)).
        Boolean(bool) = TypedParamValue::BOOLEAN,
        /// `VIR_TYPED_PARAM_STRING` (7): a `remote_nonnull_string`.
        String(String) = TypedParamValue::STRING,
    }
}

impl TypedParamValue {
    /// `VIR_TYPED_PARAM_INT`.
    pub const INT: i32 = 1;
    /// `VIR_TYPED_PARAM_UINT`.
    pub const UINT: i32 = 2;
    /// `VIR_TYPED_PARAM_LLONG`.
    pub const LLONG: i32 = 3;
    /// `VIR_TYPED_PARAM_ULLONG`.
    pub const ULLONG: i32 = 4;
    /// `VIR_TYPED_PARAM_DOUBLE`.
    pub const DOUBLE: i32 = 5;
    /// `VIR_TYPED_PARAM_BOOLEAN`.
    pub const BOOLEAN: i32 = 6;
    /// `VIR_TYPED_PARAM_STRING`.
    pub const STRING: i32 = 7;
}

xdr_struct! {
    #[xdr(no_eq)]
    /// One typed parameter (`remote_typed_param`): a field name such as
    /// `"cpu_shares"` or `"balloon.current"`, and its value.
    pub struct TypedParam {
        /// The parameter's name (`VIR_DOMAIN_*` field names).
        pub field: String,
        /// Its value.
        pub value: TypedParamValue,
    }
}

impl TypedParam {
    /// A parameter named `field` holding `value` (any type with a
    /// [`TypedParamValue`] conversion: `i32`, `u32`, `i64`, `u64`, `f64`,
    /// `bool`, `String`, `&str`).
    pub fn new(field: impl Into<String>, value: impl Into<TypedParamValue>) -> Self {
        Self {
            field: field.into(),
            value: value.into(),
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $var:ident),* $(,)?) => {$(
        impl From<$t> for TypedParamValue {
            fn from(v: $t) -> Self {
                Self::$var(v.into())
            }
        }
    )*};
}
value_from! {
    i32 => Int,
    u32 => UInt,
    i64 => LLong,
    u64 => ULLong,
    f64 => Double,
    bool => Boolean,
    String => String,
    &str => String,
}

/// Typed reads. The `as_*` accessors answer only for their own type (as
/// libvirt's `virTypedParamsGet*` do); the `to_*` ones take any value that
/// converts without loss.
impl TypedParamValue {
    /// The value of an `Int`.
    pub fn as_i32(&self) -> Option<i32> {
        match self {
            Self::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `UInt`.
    pub fn as_u32(&self) -> Option<u32> {
        match self {
            Self::UInt(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of an `LLong`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Self::LLong(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `ULLong`.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::ULLong(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `Double`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Self::Double(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `Boolean`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Boolean(v) => Some(*v),
            _ => None,
        }
    }

    /// The value of a `String`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(v) => Some(v),
            _ => None,
        }
    }

    /// Any integer that is a `u64` (a negative one is not).
    pub fn to_u64(&self) -> Option<u64> {
        match *self {
            Self::Int(v) => u64::try_from(v).ok(),
            Self::UInt(v) => Some(u64::from(v)),
            Self::LLong(v) => u64::try_from(v).ok(),
            Self::ULLong(v) => Some(v),
            _ => None,
        }
    }

    /// Any integer that is an `i64` (a `ULLong` above `i64::MAX` is not).
    pub fn to_i64(&self) -> Option<i64> {
        match *self {
            Self::Int(v) => Some(i64::from(v)),
            Self::UInt(v) => Some(i64::from(v)),
            Self::LLong(v) => Some(v),
            Self::ULLong(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }
}

impl TypedParam {
    /// The value of the parameter named `field` in `params` (the first, as
    /// libvirt's `virTypedParamsGet` finds it).
    pub fn find<'a>(params: &'a [TypedParam], field: &str) -> Option<&'a TypedParamValue> {
        params.iter().find(|p| p.field == field).map(|p| &p.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::limits::REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX;
    use crate::proto::xdr::{XdrError, from_bytes, to_bytes};
    use proptest::prelude::*;

    xdr_struct! {
        #[xdr(no_eq)]
        /// `remote_domain_get_memory_parameters_ret`'s shape.
        struct MemoryParameters {
            params<REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX>: Vec<TypedParam>,
            nparams: i32,
        }
    }

    pub(crate) fn value() -> impl Strategy<Value = TypedParamValue> {
        prop_oneof![
            any::<i32>().prop_map(TypedParamValue::Int),
            any::<u32>().prop_map(TypedParamValue::UInt),
            any::<i64>().prop_map(TypedParamValue::LLong),
            any::<u64>().prop_map(TypedParamValue::ULLong),
            any::<u64>().prop_map(|b| TypedParamValue::Double(f64::from_bits(b))),
            any::<bool>().prop_map(TypedParamValue::Boolean),
            ".{0,12}".prop_map(TypedParamValue::String),
        ]
    }

    /// Encoding, decoding and encoding again gives the same bytes (a NaN
    /// is unequal to itself, so the bytes are compared, not the values).
    fn same_bytes_again<T: crate::proto::xdr::Encode + crate::proto::xdr::Decode>(
        v: &T,
    ) -> Vec<u8> {
        let wire = to_bytes(v).unwrap();
        let back: T = from_bytes(&wire).unwrap();
        assert_eq!(to_bytes(&back).unwrap(), wire);
        wire.to_vec()
    }

    proptest! {
        #[test]
        fn values_round_trip(v in value()) {
            let wire = same_bytes_again(&v);
            prop_assert_eq!(wire.len() % 4, 0);
            prop_assert_eq!(&wire[..4], &v.discriminant().to_be_bytes());
            for cut in 0..wire.len() {
                prop_assert!(from_bytes::<TypedParamValue>(&wire[..cut]).is_err());
            }
        }

        #[test]
        fn params_round_trip(field in ".{0,12}", v in value()) {
            let p = TypedParam::new(field, v);
            same_bytes_again(&p);
        }

        #[test]
        fn param_lists_round_trip(params in proptest::collection::vec(
            (".{0,6}", value()).prop_map(|(f, v)| TypedParam::new(f, v)), 0..=16)) {
            let nparams = params.len() as i32;
            same_bytes_again(&MemoryParameters { params, nparams });
        }

        #[test]
        fn decoding_garbage_never_panics(b: Vec<u8>) {
            let _ = from_bytes::<TypedParamValue>(&b);
            let _ = from_bytes::<Vec<TypedParam>>(&b);
            let _ = from_bytes::<MemoryParameters>(&b);
        }

        #[test]
        fn unknown_types_are_refused(kind in any::<i32>().prop_filter("unknown", |k| !(1..=7).contains(k))) {
            let mut wire = kind.to_be_bytes().to_vec();
            wire.extend_from_slice(&[0; 8]);
            prop_assert_eq!(
                from_bytes::<TypedParamValue>(&wire).unwrap_err(),
                XdrError::UnknownDiscriminant { union: "TypedParamValue", value: i64::from(kind) }
            );
        }
    }

    #[test]
    fn accessors_answer_for_their_own_type_and_conversions_without_loss() {
        let params = vec![
            TypedParam::new("cpu_shares", 1024_u64),
            TypedParam::new("vcpu_quota", -1_i64),
            TypedParam::new("numa_nodeset", "0-1"),
            TypedParam::new("swap_hard_limit", 7_u32),
            TypedParam::new("ok", true),
            TypedParam::new("load", 0.5_f64),
            TypedParam::new("cpu_shares", 1_u64),
        ];
        let get = |f: &str| TypedParam::find(&params, f).unwrap();
        assert_eq!(get("cpu_shares").as_u64(), Some(1024), "the first wins");
        assert_eq!(get("cpu_shares").as_i64(), None, "exact type only");
        assert_eq!(get("vcpu_quota").as_i64(), Some(-1));
        assert_eq!(get("vcpu_quota").to_u64(), None, "negative");
        assert_eq!(get("vcpu_quota").to_i64(), Some(-1));
        assert_eq!(get("swap_hard_limit").to_u64(), Some(7));
        assert_eq!(get("swap_hard_limit").as_u32(), Some(7));
        assert_eq!(get("numa_nodeset").as_str(), Some("0-1"));
        assert_eq!(get("ok").as_bool(), Some(true));
        assert_eq!(get("load").as_f64(), Some(0.5));
        assert_eq!(get("load").to_i64(), None);
        assert_eq!(TypedParamValue::Int(-3).as_i32(), Some(-3));
        assert_eq!(TypedParamValue::ULLong(u64::MAX).to_i64(), None);
        assert!(TypedParam::find(&params, "absent").is_none());
    }

    #[test]
    fn layout_is_libvirts() {
        // field "a", VIR_TYPED_PARAM_DOUBLE, 1.5 as IEEE 754 big-endian.
        let wire = to_bytes(&TypedParam::new("a", 1.5)).unwrap();
        assert_eq!(
            &wire[..],
            &[
                0, 0, 0, 1, b'a', 0, 0, 0, 0, 0, 0, 5, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0
            ]
        );
        let wire = to_bytes(&TypedParam::new("b", true)).unwrap();
        assert_eq!(&wire[4..], &[b'b', 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 1]);
    }

    #[test]
    fn nan_payloads_survive() {
        let nan = f64::from_bits(0x7ff8_dead_beef_0001);
        let wire = to_bytes(&TypedParamValue::Double(nan)).unwrap();
        match from_bytes::<TypedParamValue>(&wire).unwrap() {
            TypedParamValue::Double(d) => assert_eq!(d.to_bits(), nan.to_bits()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_boolean_other_than_0_or_1_is_refused() {
        let wire = [0, 0, 0, 6, 0, 0, 0, 2];
        assert!(matches!(
            from_bytes::<TypedParamValue>(&wire),
            Err(XdrError::Invalid {
                what: "bool",
                value: 2
            })
        ));
    }

    #[test]
    fn a_list_over_its_maximum_is_refused_both_ways() {
        let params = vec![TypedParam::new("x", 1); REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX + 1];
        let over = MemoryParameters {
            params,
            nparams: 17,
        };
        assert_eq!(
            to_bytes(&over).unwrap_err(),
            XdrError::TooLong { len: 17, max: 16 }
        );
        // The count word alone: refused for its maximum, not for the
        // missing elements.
        assert_eq!(
            from_bytes::<MemoryParameters>(&[0, 0, 0, 17]).unwrap_err(),
            XdrError::TooLong { len: 17, max: 16 }
        );
    }
}

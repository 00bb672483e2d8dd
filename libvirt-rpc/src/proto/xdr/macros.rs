//! `xdr_struct!` and `xdr_union!`: declare an XDR struct or union as a
//! Rust type with its codec. Their expansions name only this crate (through
//! `$crate`) and `core`, so they work in any crate, whatever it has in
//! scope; the `__xdr_*` helpers they call are hidden, not API.

/// Declares a plain struct whose XDR form is its fields in order, and
/// implements [`Encode`](crate::proto::xdr::Encode) and
/// [`Decode`](crate::proto::xdr::Decode) for it (deriving `Debug`, `Clone`,
/// `PartialEq` and `Eq`).
///
/// A variable-length field with a maximum of its own is declared as in the
/// `.x` file, `name<MAX>: Type` (`MAX` a path to a constant, such as
/// [`REMOTE_DOMAIN_LIST_MAX`](crate::proto::limits::REMOTE_DOMAIN_LIST_MAX)):
/// it is encoded and decoded through
/// [`EncodeBounded`](crate::proto::xdr::EncodeBounded) /
/// [`DecodeBounded`](crate::proto::xdr::DecodeBounded), so a longer value is
/// [`XdrError::TooLong`](crate::proto::xdr::XdrError::TooLong) both ways
/// (decoding refuses it before allocating), and the field's docs say its
/// maximum. Other fields use their type's default.
///
/// A struct holding floats (or anything else without `Eq`) starts with
/// `#[xdr(no_eq)]`, before any other attribute: it then derives
/// `PartialEq` only.
///
/// The expansion names only this crate (through `$crate`) and `core`, so
/// a crate using it needs no dependency of its own on `bytes`, and its own
/// `Result` or `Ok` do not interfere:
///
/// ```
/// // As if this crate had no `bytes` dependency: `::bytes` would now name
/// // `core`, so an expansion naming `::bytes::BytesMut` fails to compile.
/// extern crate core as bytes;
/// // Local items shadowing the prelude's names must not matter either.
/// #[allow(dead_code)]
/// type Result = ();
/// #[allow(dead_code)]
/// struct Ok;
///
/// use libvirt_rpc::proto::limits::REMOTE_NODE_CPU_STATS_MAX;
/// use libvirt_rpc::proto::xdr::{from_bytes, to_bytes, XdrError};
///
/// libvirt_rpc::xdr_struct! {
///     /// `remote_node_get_cpu_stats_args`'s shape.
///     pub struct CpuStatsArgs {
///         pub cpu_num: i32,
///         pub nparams: i32,
///         pub flags: u32,
///     }
/// }
/// libvirt_rpc::xdr_struct! {
///     /// `remote_node_get_cpu_stats`.
///     pub struct CpuStat {
///         pub field: String,
///         pub value: u64,
///     }
/// }
/// libvirt_rpc::xdr_struct! {
///     /// `remote_node_get_cpu_stats_ret`: at most 16 parameters.
///     pub struct CpuStatsRet {
///         pub params<REMOTE_NODE_CPU_STATS_MAX>: Vec<CpuStat>,
///         pub nparams: i32,
///     }
/// }
///
/// let args = CpuStatsArgs { cpu_num: -1, nparams: 0, flags: 0 };
/// let wire = to_bytes(&args).unwrap();
/// assert_eq!(wire.len(), 12);
/// assert_eq!(from_bytes::<CpuStatsArgs>(&wire).unwrap(), args);
///
/// let stat = CpuStat { field: "user".into(), value: 7 };
/// let too_many = CpuStatsRet { params: vec![stat; 17], nparams: 17 };
/// assert!(matches!(to_bytes(&too_many), Err(XdrError::TooLong { len: 17, max: 16 })));
/// // A count of 17 on the wire is refused before anything is read or allocated.
/// let wire = [0, 0, 0, 17];
/// assert!(matches!(from_bytes::<CpuStatsRet>(&wire), Err(XdrError::TooLong { len: 17, max: 16 })));
/// ```
#[macro_export]
macro_rules! xdr_struct {
    (#[xdr(no_eq)] $(#[$m:meta])* $vis:vis struct $name:ident { $($body:tt)* }) => {
        $crate::__xdr_struct! {
            [::core::cmp::PartialEq] $(#[$m])* $vis struct $name { $($body)* }
        }
    };
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($body:tt)* }) => {
        $crate::__xdr_struct! {
            [::core::cmp::PartialEq, ::core::cmp::Eq] $(#[$m])* $vis struct $name { $($body)* }
        }
    };
}

/// `xdr_struct!`'s expansion (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_struct {
    ([$($eq:tt)*] $(#[$m:meta])* $vis:vis struct $name:ident {
        $($(#[$fm:meta])* $fvis:vis $field:ident $(< $max:path >)? : $ty:ty),* $(,)?
    }) => {
        $(#[$m])*
        #[derive(::core::fmt::Debug, ::core::clone::Clone, $($eq)*)]
        $vis struct $name {
            $(
                $(#[$fm])*
                $(#[doc = ::core::concat!("\n\nAt most `", ::core::stringify!($max), "` on the wire.")])?
                $fvis $field: $ty,
            )*
        }

        impl $crate::proto::xdr::Encode for $name {
            fn encode(
                &self,
                _out: &mut $crate::bytes::BytesMut,
            ) -> ::core::result::Result<(), $crate::proto::xdr::XdrError> {
                $( $crate::__xdr_put!(&self.$field, _out $(, $max)?)?; )*
                ::core::result::Result::Ok(())
            }
        }
        impl $crate::proto::xdr::Decode for $name {
            fn decode(
                _r: &mut $crate::proto::xdr::Reader<'_>,
            ) -> ::core::result::Result<Self, $crate::proto::xdr::XdrError> {
                ::core::result::Result::Ok(Self {
                    $($field: $crate::__xdr_get!(_r $(, $max)?)?),*
                })
            }
        }
    };
}

/// Encodes one field, with its own maximum when it has one (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_put {
    ($v:expr, $out:ident) => {
        $crate::proto::xdr::Encode::encode($v, $out)
    };
    ($v:expr, $out:ident, $max:path) => {
        $crate::proto::xdr::EncodeBounded::encode_bounded($v, $max, $out)
    };
}

/// Decodes one field, with its own maximum when it has one (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_get {
    ($r:ident) => {
        $crate::proto::xdr::Decode::decode($r)
    };
    ($r:ident, $max:path) => {
        $crate::proto::xdr::DecodeBounded::decode_bounded($r, $max)
    };
}

/// Declares an XDR discriminated union as a Rust enum, one variant per
/// arm, and implements [`Encode`](crate::proto::xdr::Encode) and
/// [`Decode`](crate::proto::xdr::Decode) for it (deriving `Debug`, `Clone`
/// and `PartialEq`; add `#[derive(Eq)]` when every arm has it).
///
/// `switch (i32)` or `switch (u32)` gives the discriminant's type (`int`,
/// `unsigned int` or an enum, which travels as `int`); each arm is
/// `Variant(Type) = value` (`case value: Type x;`) or `Variant = value`
/// (`case value: void;`), its value a literal or a path to a constant. A
/// variable-length arm with a maximum of its own is `Variant<MAX>(Type)`,
/// as in [`crate::xdr_struct!`]. On the wire: the discriminant, then the
/// arm's value. Decoding a discriminant no arm names is
/// [`XdrError::UnknownDiscriminant`](crate::proto::xdr::XdrError::UnknownDiscriminant)
/// (a `default:` arm is not supported). `discriminant()` gives a value's
/// discriminant.
///
/// ```
/// extern crate core as bytes;
/// #[allow(dead_code)]
/// type Result = ();
///
/// use libvirt_rpc::proto::xdr::{from_bytes, to_bytes, XdrError};
///
/// const NAME_MAX: usize = 8;
///
/// libvirt_rpc::xdr_union! {
///     /// A value that is a number, a short name, or nothing.
///     #[derive(Eq)]
///     pub enum Answer switch (i32) {
///         /// `case 1: unsigned hyper n;`
///         Number(u64) = 1,
///         /// `case 2: string name<NAME_MAX>;`
///         Name<NAME_MAX>(String) = 2,
///         /// `case 3: void;`
///         Nothing = 3,
///     }
/// }
///
/// let wire = to_bytes(&Answer::Name("eight".into())).unwrap();
/// assert_eq!(&wire[..], b"\0\0\0\x02\0\0\0\x05eight\0\0\0");
/// assert_eq!(from_bytes::<Answer>(&wire).unwrap(), Answer::Name("eight".into()));
/// assert_eq!(Answer::Nothing.discriminant(), 3);
/// assert_eq!(to_bytes(&Answer::Nothing).unwrap().len(), 4);
/// assert!(matches!(to_bytes(&Answer::Name("too long!".into())), Err(XdrError::TooLong { .. })));
/// assert_eq!(
///     from_bytes::<Answer>(&[0, 0, 0, 9]),
///     Err(XdrError::UnknownDiscriminant { union: "Answer", value: 9 })
/// );
/// ```
#[macro_export]
macro_rules! xdr_union {
    ($(#[$m:meta])* $vis:vis enum $name:ident switch ($dty:ty) {
        $($(#[$vm:meta])* $var:ident $(< $max:path >)? $(($ty:ty))? = $val:expr),* $(,)?
    }) => {
        $(#[$m])*
        #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::cmp::PartialEq)]
        $vis enum $name {
            $(
                $(#[$vm])*
                $(#[doc = ::core::concat!("\n\nAt most `", ::core::stringify!($max), "` on the wire.")])?
                $var $(($ty))?,
            )*
        }

        impl $name {
            /// The discriminant this value travels with.
            #[allow(dead_code)]
            $vis fn discriminant(&self) -> $dty {
                match self {
                    $($crate::__xdr_union_pat!($name $var [$($ty)?] _v) => $val,)*
                }
            }
        }

        impl $crate::proto::xdr::Encode for $name {
            fn encode(
                &self,
                _out: &mut $crate::bytes::BytesMut,
            ) -> ::core::result::Result<(), $crate::proto::xdr::XdrError> {
                $crate::proto::xdr::Encode::encode(&self.discriminant(), _out)?;
                match self {
                    $($crate::__xdr_union_pat!($name $var [$($ty)?] _v) => {
                        $crate::__xdr_union_put!(_out _v [$($ty)?] [$($max)?])
                    })*
                }
            }
        }

        impl $crate::proto::xdr::Decode for $name {
            fn decode(
                _r: &mut $crate::proto::xdr::Reader<'_>,
            ) -> ::core::result::Result<Self, $crate::proto::xdr::XdrError> {
                let _d: $dty = $crate::proto::xdr::Decode::decode(_r)?;
                $(
                    if _d == $val {
                        return ::core::result::Result::Ok(
                            $crate::__xdr_union_get!($name $var _r [$($ty)?] [$($max)?])
                        );
                    }
                )*
                ::core::result::Result::Err($crate::proto::xdr::XdrError::UnknownDiscriminant {
                    union: ::core::stringify!($name),
                    value: ::core::convert::From::from(_d),
                })
            }
        }
    };
}

/// A union arm's pattern, binding its value to `$v` (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_union_pat {
    ($name:ident $var:ident [] $v:ident) => {
        $name::$var
    };
    ($name:ident $var:ident [$($ty:tt)+] $v:ident) => {
        $name::$var($v)
    };
}

/// Encodes a union arm's value (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_union_put {
    ($out:ident $v:ident [] []) => {
        ::core::result::Result::Ok(())
    };
    ($out:ident $v:ident [$($ty:tt)+] []) => {
        $crate::proto::xdr::Encode::encode($v, $out)
    };
    ($out:ident $v:ident [$($ty:tt)+] [$max:path]) => {
        $crate::proto::xdr::EncodeBounded::encode_bounded($v, $max, $out)
    };
}

/// Decodes a union arm's value (not API).
#[doc(hidden)]
#[macro_export]
macro_rules! __xdr_union_get {
    ($name:ident $var:ident $r:ident [] []) => {
        $name::$var
    };
    ($name:ident $var:ident $r:ident [$($ty:tt)+] []) => {
        $name::$var($crate::proto::xdr::Decode::decode($r)?)
    };
    ($name:ident $var:ident $r:ident [$($ty:tt)+] [$max:path]) => {
        $name::$var($crate::proto::xdr::DecodeBounded::decode_bounded($r, $max)?)
    };
}

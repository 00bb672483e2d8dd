//! A small XDR (RFC 4506) codec with every bound checked.
//!
//! Decoding reads from a byte slice through [`Reader`]; it never panics, never
//! reads past the end and never allocates more than the bytes that remain in
//! the message (a list's declared length is checked against what is left
//! before any allocation). Encoding appends to a [`bytes::BytesMut`] and
//! refuses values the protocol cannot carry (strings over
//! [`STRING_MAX`], lists over `u32::MAX`).
//!
//! rpcgen encodes `char`, `unsigned char`, `short` and `bool` as 4-byte words;
//! so does this codec.

use bytes::{BufMut, Bytes, BytesMut};

/// Largest string libvirt sends or accepts (`REMOTE_STRING_MAX`).
pub const STRING_MAX: usize = 4_194_304;

/// Why a value could not be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XdrError {
    /// The input ended before the value did.
    #[error("XDR input truncated: needed {needed} more bytes at offset {offset}")]
    Truncated {
        /// Offset in the payload where the value started.
        offset: usize,
        /// Bytes still missing.
        needed: usize,
    },
    /// A length prefix exceeds the protocol's limit for that field.
    #[error("XDR length {len} exceeds the limit of {max}")]
    TooLong {
        /// The declared length.
        len: usize,
        /// The limit for this field.
        max: usize,
    },
    /// A value that must be one of a few (bool, enum, optional) is not.
    #[error("invalid XDR {what}: {value}")]
    Invalid {
        /// What was being decoded.
        what: &'static str,
        /// The value found on the wire.
        value: u32,
    },
    /// A string is not valid UTF-8.
    #[error("XDR string is not valid UTF-8")]
    Utf8,
    /// Bytes were left over after the value was decoded.
    #[error("{0} trailing bytes after the XDR value")]
    Trailing(usize),
}

/// A value that can be written in XDR.
pub trait Encode {
    /// Appends the value's XDR encoding to `out`.
    ///
    /// # Errors
    /// [`XdrError::TooLong`] when a string or list exceeds its limit.
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError>;
}

/// A value that can be read from XDR.
pub trait Decode: Sized {
    /// Reads one value, advancing the reader past it.
    ///
    /// # Errors
    /// [`XdrError`] when the input is truncated or malformed.
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError>;
}

/// Decodes exactly one value from `bytes`, rejecting trailing bytes.
///
/// # Errors
/// [`XdrError`] when the bytes are not exactly one valid value.
pub fn from_bytes<T: Decode>(bytes: &[u8]) -> Result<T, XdrError> {
    let mut r = Reader::new(bytes);
    let v = T::decode(&mut r)?;
    match r.remaining() {
        0 => Ok(v),
        n => Err(XdrError::Trailing(n)),
    }
}

/// Encodes one value into a fresh buffer.
///
/// # Errors
/// [`XdrError::TooLong`] when a string or list exceeds its limit.
pub fn to_bytes<T: Encode + ?Sized>(v: &T) -> Result<Bytes, XdrError> {
    let mut out = BytesMut::new();
    v.encode(&mut out)?;
    Ok(out.freeze())
}

/// A cursor over XDR input.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

fn padding(len: usize) -> usize {
    (4 - len % 4) % 4
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Takes `n` raw bytes.
    ///
    /// # Errors
    /// [`XdrError::Truncated`] when fewer than `n` bytes remain.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        match rest.get(..n) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(XdrError::Truncated {
                offset: self.pos,
                needed: n - rest.len(),
            }),
        }
    }

    /// Reads an unsigned 32-bit integer.
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a signed 32-bit integer.
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn i32(&mut self) -> Result<i32, XdrError> {
        self.u32().map(|v| v as i32)
    }

    /// Reads an unsigned 64-bit integer (`unsigned hyper`).
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn u64(&mut self) -> Result<u64, XdrError> {
        let hi = u64::from(self.u32()?);
        let lo = u64::from(self.u32()?);
        Ok(hi << 32 | lo)
    }

    /// Reads a variable-length opaque of at most `max` bytes (zero-copy).
    ///
    /// # Errors
    /// [`XdrError::TooLong`] or [`XdrError::Truncated`].
    pub fn opaque(&mut self, max: usize) -> Result<&'a [u8], XdrError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        let data = self.take(len)?;
        self.take(padding(len))?;
        Ok(data)
    }

    /// Reads a fixed-length opaque of `N` bytes.
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn fixed<const N: usize>(&mut self) -> Result<[u8; N], XdrError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        self.take(padding(N))?;
        Ok(out)
    }

    /// Reads a string of at most `max` bytes that must be UTF-8.
    ///
    /// # Errors
    /// [`XdrError::TooLong`], [`XdrError::Truncated`] or [`XdrError::Utf8`].
    pub fn string(&mut self, max: usize) -> Result<String, XdrError> {
        let b = self.opaque(max)?;
        std::str::from_utf8(b)
            .map(str::to_owned)
            .map_err(|_| XdrError::Utf8)
    }

    /// Reads the length of a list and checks it against `max` and against
    /// the bytes left (every element takes at least 4 bytes), so that the
    /// caller may allocate `len` elements safely.
    ///
    /// # Errors
    /// [`XdrError::TooLong`] or [`XdrError::Truncated`].
    pub fn list_len(&mut self, max: usize) -> Result<usize, XdrError> {
        let start = self.pos;
        let len = self.u32()? as usize;
        if len > max {
            return Err(XdrError::TooLong { len, max });
        }
        let need = len.saturating_mul(4);
        if need > self.remaining() {
            return Err(XdrError::Truncated {
                offset: start,
                needed: need - self.remaining(),
            });
        }
        Ok(len)
    }
}

/// Appends a variable-length opaque with its length and padding.
///
/// # Errors
/// [`XdrError::TooLong`] when `data` exceeds `max`.
pub fn put_opaque(out: &mut BytesMut, data: &[u8], max: usize) -> Result<(), XdrError> {
    if data.len() > max || u32::try_from(data.len()).is_err() {
        return Err(XdrError::TooLong {
            len: data.len(),
            max,
        });
    }
    out.put_u32(data.len() as u32);
    out.put_slice(data);
    out.put_bytes(0, padding(data.len()));
    Ok(())
}

/// Appends a list length, checking it against `max`.
///
/// # Errors
/// [`XdrError::TooLong`].
pub fn put_list_len(out: &mut BytesMut, len: usize, max: usize) -> Result<(), XdrError> {
    if len > max || u32::try_from(len).is_err() {
        return Err(XdrError::TooLong { len, max });
    }
    out.put_u32(len as u32);
    Ok(())
}

impl Encode for u32 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u32(*self);
        Ok(())
    }
}
impl Decode for u32 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.u32()
    }
}
impl Encode for i32 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_i32(*self);
        Ok(())
    }
}
impl Decode for i32 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.i32()
    }
}
impl Encode for u64 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u64(*self);
        Ok(())
    }
}
impl Decode for u64 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.u64()
    }
}
impl Encode for i64 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_i64(*self);
        Ok(())
    }
}
impl Decode for i64 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.u64().map(|v| v as i64)
    }
}
impl Encode for bool {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u32(u32::from(*self));
        Ok(())
    }
}
impl Decode for bool {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        match r.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(XdrError::Invalid {
                what: "bool",
                value,
            }),
        }
    }
}
/// `()` is XDR `void`: no bytes.
impl Encode for () {
    fn encode(&self, _out: &mut BytesMut) -> Result<(), XdrError> {
        Ok(())
    }
}
impl Decode for () {
    fn decode(_r: &mut Reader<'_>) -> Result<Self, XdrError> {
        Ok(())
    }
}
/// Strings are `remote_nonnull_string` (at most [`STRING_MAX`] bytes).
impl Encode for String {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_str().encode(out)
    }
}
impl Encode for str {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        put_opaque(out, self.as_bytes(), STRING_MAX)
    }
}
impl Decode for String {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.string(STRING_MAX)
    }
}
/// `Option<T>` is an XDR optional (`T *`): a bool, then the value if 1.
impl<T: Encode> Encode for Option<T> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        match self {
            None => false.encode(out),
            Some(v) => {
                true.encode(out)?;
                v.encode(out)
            }
        }
    }
}
impl<T: Decode> Decode for Option<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        match r.u32()? {
            0 => Ok(None),
            1 => T::decode(r).map(Some),
            value => Err(XdrError::Invalid {
                what: "optional discriminant",
                value,
            }),
        }
    }
}
/// `Vec<T>` is a variable-length array with no limit beyond the message's
/// size; fields with a protocol limit check it themselves.
impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        put_list_len(out, self.len(), u32::MAX as usize)?;
        self.iter().try_for_each(|v| v.encode(out))
    }
}
impl<T: Decode> Decode for Vec<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        let len = r.list_len(u32::MAX as usize)?;
        // Reserve no more than the bytes left could fill: an element's
        // in-memory size may be many times its 4-byte minimum on the wire.
        let fits = r.remaining() / std::mem::size_of::<T>().max(1);
        let mut v = Vec::with_capacity(len.min(fits));
        for _ in 0..len {
            v.push(T::decode(r)?);
        }
        Ok(v)
    }
}
/// `[u8; 16]` is a fixed opaque such as `remote_uuid`.
impl Encode for [u8; 16] {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_slice(self);
        Ok(())
    }
}
impl Decode for [u8; 16] {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.fixed::<16>()
    }
}

/// A reference encodes as the value it points to.
impl<T: Encode + ?Sized> Encode for &T {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        (**self).encode(out)
    }
}

/// Tuples encode their elements in order, like an XDR struct: procedure
/// arguments are written as tuples.
macro_rules! tuple_encode {
    ($($t:ident),+) => {
        impl<$($t: Encode),+> Encode for ($($t,)+) {
            #[allow(non_snake_case)]
            fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
                let ($($t,)+) = self;
                $($t.encode(out)?;)+
                Ok(())
            }
        }
        impl<$($t: Decode),+> Decode for ($($t,)+) {
            fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
                Ok(($($t::decode(r)?,)+))
            }
        }
    };
}
tuple_encode!(A);
tuple_encode!(A, B);
tuple_encode!(A, B, C);
tuple_encode!(A, B, C, D);
tuple_encode!(A, B, C, D, E);
tuple_encode!(A, B, C, D, E, F);
tuple_encode!(A, B, C, D, E, F, G);

/// Declares a plain struct whose XDR form is its fields in order, and
/// implements [`Encode`] and [`Decode`] for it (deriving `Debug`, `Clone`,
/// `PartialEq` and `Eq`). The expansion names only this crate (through
/// `$crate`) and `core`, so a crate using it needs no dependency of its own
/// on `bytes`, and its own `Result` or `Ok` do not interfere:
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
/// libvirt_rpc::xdr_struct! {
///     /// `remote_node_get_cpu_stats_args`'s shape.
///     pub struct CpuStatsArgs {
///         pub cpu_num: i32,
///         pub nparams: i32,
///         pub flags: u32,
///     }
/// }
///
/// let args = CpuStatsArgs { cpu_num: -1, nparams: 0, flags: 0 };
/// let wire = libvirt_rpc::proto::xdr::to_bytes(&args).unwrap();
/// assert_eq!(wire.len(), 12);
/// assert_eq!(libvirt_rpc::proto::xdr::from_bytes::<CpuStatsArgs>(&wire).unwrap(), args);
/// ```
#[macro_export]
macro_rules! xdr_struct {
    ($(#[$m:meta])* $vis:vis struct $name:ident { $($(#[$fm:meta])* $fvis:vis $field:ident : $ty:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(
            ::core::fmt::Debug,
            ::core::clone::Clone,
            ::core::cmp::PartialEq,
            ::core::cmp::Eq,
        )]
        $vis struct $name { $($(#[$fm])* $fvis $field: $ty),* }

        impl $crate::proto::xdr::Encode for $name {
            fn encode(
                &self,
                _out: &mut $crate::bytes::BytesMut,
            ) -> ::core::result::Result<(), $crate::proto::xdr::XdrError> {
                $( $crate::proto::xdr::Encode::encode(&self.$field, _out)?; )*
                ::core::result::Result::Ok(())
            }
        }
        impl $crate::proto::xdr::Decode for $name {
            fn decode(
                _r: &mut $crate::proto::xdr::Reader<'_>,
            ) -> ::core::result::Result<Self, $crate::proto::xdr::XdrError> {
                ::core::result::Result::Ok(Self {
                    $($field: $crate::proto::xdr::Decode::decode(_r)?),*
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rt<T: Encode + Decode + PartialEq + std::fmt::Debug>(v: T) {
        let b = to_bytes(&v).unwrap();
        assert_eq!(b.len() % 4, 0, "XDR is 4-byte aligned");
        assert_eq!(from_bytes::<T>(&b).unwrap(), v);
        for cut in 0..b.len() {
            assert!(from_bytes::<T>(&b[..cut]).is_err(), "cut at {cut}");
        }
    }

    proptest! {
        #[test]
        fn u32_round_trips(v: u32) { rt(v) }
        #[test]
        fn i32_round_trips(v: i32) { rt(v) }
        #[test]
        fn u64_round_trips(v: u64) { rt(v) }
        #[test]
        fn i64_round_trips(v: i64) { rt(v) }
        #[test]
        fn bool_round_trips(v: bool) { rt(v) }
        #[test]
        fn string_round_trips(v in ".{0,40}") { rt(v) }
        #[test]
        fn option_round_trips(v: Option<String>) { rt(v) }
        #[test]
        fn vec_round_trips(v: Vec<u32>) { rt(v) }
        #[test]
        fn uuid_round_trips(v: [u8; 16]) { rt(v) }
        #[test]
        fn decoding_garbage_never_panics(b: Vec<u8>) {
            let _ = from_bytes::<Vec<Option<String>>>(&b);
            let _ = from_bytes::<(u64, bool, i32)>(&b);
        }
    }

    #[test]
    fn string_is_padded() {
        assert_eq!(&to_bytes("abcde").unwrap()[..], b"\0\0\0\x05abcde\0\0\0");
    }

    #[test]
    fn huge_list_length_is_rejected_before_allocating() {
        let e = from_bytes::<Vec<u64>>(&[0xff, 0xff, 0xff, 0xf0]).unwrap_err();
        assert!(matches!(e, XdrError::Truncated { .. }), "{e:?}");
    }

    #[test]
    fn string_over_limit_is_rejected() {
        let e = from_bytes::<String>(&[0x00, 0x40, 0x00, 0x01]).unwrap_err();
        assert!(matches!(e, XdrError::TooLong { .. }), "{e:?}");
        let long = "x".repeat(STRING_MAX + 1);
        assert!(to_bytes(&long).is_err());
    }

    #[test]
    fn bad_bool_and_optional_are_invalid() {
        assert!(matches!(
            from_bytes::<bool>(&[0, 0, 0, 2]),
            Err(XdrError::Invalid { .. })
        ));
        assert!(matches!(
            from_bytes::<Option<u32>>(&[0, 0, 0, 7, 0, 0, 0, 0]),
            Err(XdrError::Invalid { .. })
        ));
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        assert_eq!(
            from_bytes::<u32>(&[0; 8]).unwrap_err(),
            XdrError::Trailing(4)
        );
    }
}

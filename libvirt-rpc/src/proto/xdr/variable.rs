//! Variable-length values — strings, opaques, arrays — and optional data,
//! with their maxima.
//!
//! [`Encode`] and [`Decode`] apply a type's default maximum
//! ([`STRING_MAX`] for strings, `u32::MAX` for opaques and arrays);
//! [`EncodeBounded`] and [`DecodeBounded`] take a field's own, the `<N>` of
//! its `.x` declaration. Decoding checks a declared length against the
//! maximum, then against the bytes left, and only then allocates.

use bytes::BytesMut;

use super::{Decode, Encode, Reader, STRING_MAX, XdrError, put_list_len, put_opaque};

/// What the length word of an opaque or array can say.
const LENGTH_MAX: usize = u32::MAX as usize;

/// A variable-length value (`string<N>`, `opaque<N>`, `T<N>`, or an
/// optional one) encoded against a maximum given per field.
///
/// [`crate::xdr_struct!`] and [`crate::xdr_union!`] call it for a field
/// declared `name<MAX>: Type`.
pub trait EncodeBounded {
    /// Appends the value's XDR encoding to `out`.
    ///
    /// # Errors
    /// [`XdrError::TooLong`] when the value's length exceeds `max` (checked
    /// before its length word is written), or an element's own error. On
    /// error `out` may hold part of the value: discard it.
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError>;
}

/// A variable-length value decoded against a maximum given per field.
pub trait DecodeBounded: Sized {
    /// Reads one value, advancing the reader past it.
    ///
    /// # Errors
    /// [`XdrError::TooLong`] when the declared length exceeds `max`
    /// (checked before anything is allocated), or any error of
    /// [`Decode::decode`].
    fn decode_bounded(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError>;
}

impl<T: EncodeBounded + ?Sized> EncodeBounded for &T {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        (**self).encode_bounded(max, out)
    }
}

// Strings: `string<N>`, UTF-8.

/// `remote_nonnull_string`: at most [`STRING_MAX`] bytes.
impl Encode for str {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.encode_bounded(STRING_MAX, out)
    }
}
impl EncodeBounded for str {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        put_opaque(out, self.as_bytes(), max)
    }
}
/// `remote_nonnull_string`: at most [`STRING_MAX`] bytes.
impl Encode for String {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_str().encode(out)
    }
}
impl EncodeBounded for String {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_str().encode_bounded(max, out)
    }
}
impl Decode for String {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.string(STRING_MAX)
    }
}
impl DecodeBounded for String {
    fn decode_bounded(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError> {
        r.string(max)
    }
}

// Opaques: `opaque<N>`, packed bytes.

/// `opaque<>`: a length, the bytes, zero padding.
impl Encode for [u8] {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.encode_bounded(LENGTH_MAX, out)
    }
}
impl EncodeBounded for [u8] {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        put_opaque(out, self, max)
    }
}
/// `opaque<>`: a length, the bytes, zero padding.
impl Encode for Vec<u8> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_slice().encode(out)
    }
}
impl EncodeBounded for Vec<u8> {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_slice().encode_bounded(max, out)
    }
}
impl Decode for Vec<u8> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        Self::decode_bounded(r, LENGTH_MAX)
    }
}
impl DecodeBounded for Vec<u8> {
    fn decode_bounded(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError> {
        // `opaque` checks the length against `max` and the input before
        // the copy.
        r.opaque(max).map(<[u8]>::to_vec)
    }
}

// Arrays: `T<N>`, a count then the elements.

/// `T<>`: a count, then the elements.
impl<T: Encode> Encode for [T] {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.encode_bounded(LENGTH_MAX, out)
    }
}
impl<T: Encode> EncodeBounded for [T] {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        put_list_len(out, self.len(), max)?;
        self.iter().try_for_each(|v| v.encode(out))
    }
}
/// `T<>`: a count, then the elements. Fields with a protocol maximum
/// declare it (`name<MAX>: Vec<T>` in [`crate::xdr_struct!`]).
impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_slice().encode(out)
    }
}
impl<T: Encode> EncodeBounded for Vec<T> {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        self.as_slice().encode_bounded(max, out)
    }
}
impl<T: Decode> Decode for Vec<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        Self::decode_bounded(r, LENGTH_MAX)
    }
}
impl<T: Decode> DecodeBounded for Vec<T> {
    fn decode_bounded(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError> {
        // The count is checked against `max` and against the bytes left
        // (every element takes at least 4) before any allocation.
        let len = r.list_len(max)?;
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

// Optional data: `T *`, a bool then the value.

/// `T *` (optional data): a bool, then the value when 1.
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
/// An optional bounded value (`remote_string` is
/// `remote_nonnull_string *`): the maximum applies to the value inside.
impl<T: EncodeBounded> EncodeBounded for Option<T> {
    fn encode_bounded(&self, max: usize, out: &mut BytesMut) -> Result<(), XdrError> {
        match self {
            None => false.encode(out),
            Some(v) => {
                true.encode(out)?;
                v.encode_bounded(max, out)
            }
        }
    }
}
impl<T: Decode> Decode for Option<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        if optional_present(r)? {
            T::decode(r).map(Some)
        } else {
            Ok(None)
        }
    }
}
impl<T: DecodeBounded> DecodeBounded for Option<T> {
    fn decode_bounded(r: &mut Reader<'_>, max: usize) -> Result<Self, XdrError> {
        if optional_present(r)? {
            T::decode_bounded(r, max).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// Reads an optional's discriminant.
fn optional_present(r: &mut Reader<'_>) -> Result<bool, XdrError> {
    match r.u32()? {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(XdrError::Invalid {
            what: "optional discriminant",
            value,
        }),
    }
}

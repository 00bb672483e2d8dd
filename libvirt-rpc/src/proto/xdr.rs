//! A small XDR (RFC 4506) codec with every bound checked.
//!
//! Decoding reads from a byte slice through [`Reader`]; it never panics, never
//! reads past the end and never allocates more than the bytes that remain in
//! the message: a variable-length value's declared length is checked against
//! its maximum and against what is left *before* anything is allocated.
//! Encoding appends to a [`bytes::BytesMut`] and refuses values the protocol
//! cannot carry (a string, opaque or array over its maximum).
//!
//! # How XDR maps to Rust
//! | XDR (`.x`) | Rust | notes |
//! |---|---|---|
//! | `int`, `unsigned int` | `i32`, `u32` | |
//! | `hyper`, `unsigned hyper` | `i64`, `u64` | |
//! | `float`, `double` | `f32`, `f64` | IEEE 754, big-endian; NaN payloads kept bit for bit |
//! | `bool` | `bool` | any word but 0 or 1 is [`XdrError::Invalid`] |
//! | `char`, `short`, `unsigned short` | `i8`, `i16`, `u16` | one 4-byte word each, as rpcgen sends them; out of range is [`XdrError::Invalid`] |
//! | `void` | `()` | no bytes |
//! | `string s<N>` | `String` (`&str` to encode) | UTF-8; [`STRING_MAX`] unless the field names its `N` |
//! | `opaque o<N>` | `Vec<u8>` (`&[u8]` to encode) | length, bytes, zero padding to 4 |
//! | `opaque o[N]` | `[u8; N]` | bytes and padding, no length |
//! | `T a<N>` | `Vec<T>` (`&[T]` to encode) | count, then the elements |
//! | `T a[N]` | `[T; N]` | the elements, no count |
//! | `T *p` (optional data) | `Option<T>` | a bool, then the value when 1 |
//! | `struct` | [`crate::xdr_struct!`] or tuples | fields in order |
//! | `union switch (int d)` | [`crate::xdr_union!`] | discriminant, then the arm; an unknown discriminant is [`XdrError::UnknownDiscriminant`] |
//!
//! `u8` alone is deliberately not a codec type: `Vec<u8>` and `[u8; N]` are
//! always opaques (packed bytes), never arrays of 4-byte `unsigned char`.
//!
//! # Maxima
//! Every variable-length value has a maximum: the `<N>` of its declaration
//! in the `.x` file (`REMOTE_STRING_MAX`, `REMOTE_DOMAIN_LIST_MAX`, ...;
//! [`crate::proto::limits`] names libvirt's). [`Encode`] and [`Decode`] use
//! the type's default ([`STRING_MAX`] for strings, `u32::MAX` — what the
//! length word can say — for opaques and arrays); a field with a maximum of
//! its own goes through [`EncodeBounded`] and [`DecodeBounded`], which
//! [`crate::xdr_struct!`] and [`crate::xdr_union!`] call for fields declared
//! `name<MAX>: Type`. Either way a length over the maximum is
//! [`XdrError::TooLong`], on decoding before any allocation and on encoding
//! before the value's length word is written.

use bytes::{BufMut, Bytes, BytesMut};

mod compound;
mod macros;
mod scalars;
#[cfg(test)]
mod tests;
mod variable;

pub use compound::Bounded;
pub use variable::{DecodeBounded, EncodeBounded};

/// Largest string libvirt sends or accepts (`REMOTE_STRING_MAX`), the
/// default maximum of `String`.
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
    /// A length (of a string, opaque or array) exceeds the field's maximum.
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
    /// A union's discriminant names none of its arms.
    #[error("XDR union {union} has no arm for discriminant {value}")]
    UnknownDiscriminant {
        /// The union's Rust name.
        union: &'static str,
        /// The discriminant found on the wire (an `int` or `unsigned int`).
        value: i64,
    },
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

    /// Reads a signed 64-bit integer (`hyper`).
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn i64(&mut self) -> Result<i64, XdrError> {
        self.u64().map(|v| v as i64)
    }

    /// Reads an IEEE 754 single-precision float (`float`).
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn f32(&mut self) -> Result<f32, XdrError> {
        self.u32().map(f32::from_bits)
    }

    /// Reads an IEEE 754 double-precision float (`double`).
    ///
    /// # Errors
    /// [`XdrError::Truncated`].
    pub fn f64(&mut self) -> Result<f64, XdrError> {
        self.u64().map(f64::from_bits)
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

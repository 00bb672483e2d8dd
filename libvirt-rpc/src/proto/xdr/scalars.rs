//! Fixed-size scalars: integers, floats, `bool` and `void`.
//!
//! Every one takes one 4-byte word (`hyper` and `double` two), big-endian.
//! `char`, `short` and `unsigned short` travel as full words, as rpcgen
//! sends them; a word outside the Rust type's range is refused, never
//! truncated.

use bytes::{BufMut, BytesMut};

use super::{Decode, Encode, Reader, XdrError};

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
/// `unsigned hyper`.
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
/// `hyper`.
impl Encode for i64 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_i64(*self);
        Ok(())
    }
}
impl Decode for i64 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.i64()
    }
}
/// `float`: IEEE 754 single precision, its bits big-endian (NaN payloads
/// kept as they are).
impl Encode for f32 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u32(self.to_bits());
        Ok(())
    }
}
impl Decode for f32 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.f32()
    }
}
/// `double`: IEEE 754 double precision, its bits big-endian (NaN payloads
/// kept as they are).
impl Encode for f64 {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_u64(self.to_bits());
        Ok(())
    }
}
impl Decode for f64 {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.f64()
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

/// Integers narrower than a word: encoded widened (signed ones
/// sign-extended, as rpcgen's `xdr_char` and `xdr_short` do), decoded only
/// when the word fits.
macro_rules! narrow_int {
    ($($t:ty as $wide:ty, $what:literal;)*) => {$(
        #[doc = concat!("`", $what, "`: one 4-byte word.")]
        impl Encode for $t {
            fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
                <$wide>::from(*self).encode(out)
            }
        }
        impl Decode for $t {
            fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
                let word = r.u32()?;
                // Reinterpreting the word as the wide type is what the
                // encoder's widening undoes; `try_from` refuses the rest.
                <$t>::try_from(word as $wide).map_err(|_| XdrError::Invalid {
                    what: $what,
                    value: word,
                })
            }
        }
    )*};
}
narrow_int! {
    i8 as i32, "char";
    i16 as i32, "short";
    u16 as u32, "unsigned short";
}

//! Fixed-length values — fixed opaques `opaque[N]` and fixed arrays
//! `T[N]` — tuples (struct-like sequences) and references.

use bytes::{BufMut, BytesMut};

use super::{Decode, Encode, EncodeBounded, Reader, XdrError, padding};

/// `opaque[N]` (such as `remote_uuid`, `opaque[16]`): the `N` bytes and
/// zero padding to a multiple of 4, no length.
impl<const N: usize> Encode for [u8; N] {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        out.put_slice(self);
        out.put_bytes(0, padding(N));
        Ok(())
    }
}
impl<const N: usize> Decode for [u8; N] {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        r.fixed::<N>()
    }
}

/// `T[N]` (a fixed array, such as `char model[32]` as `[i8; 32]`): the `N`
/// elements, no count.
impl<T: Encode, const N: usize> Encode for [T; N] {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.iter().try_for_each(|v| v.encode(out))
    }
}
impl<T: Decode, const N: usize> Decode for [T; N] {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        // Every element takes at least 4 bytes: a short input fails here,
        // before the elements are allocated.
        let need = N.saturating_mul(4);
        if need > r.remaining() {
            return Err(XdrError::Truncated {
                offset: r.position(),
                needed: need - r.remaining(),
            });
        }
        let mut v = Vec::with_capacity(N);
        for _ in 0..N {
            v.push(T::decode(r)?);
        }
        // Exactly N elements were pushed, so the conversion cannot fail;
        // the error arm is unreachable but answered without a panic.
        v.try_into().map_err(|v: Vec<T>| XdrError::TooLong {
            len: v.len(),
            max: N,
        })
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
tuple_encode!(A, B, C, D, E, F, G, H);
tuple_encode!(A, B, C, D, E, F, G, H, I);
tuple_encode!(A, B, C, D, E, F, G, H, I, J);
tuple_encode!(A, B, C, D, E, F, G, H, I, J, K);
tuple_encode!(A, B, C, D, E, F, G, H, I, J, K, L);

/// A value encoded with its own maximum (a field's `<MAX>` in the `.x`
/// file) rather than its type's default: what the generated methods put in
/// their argument tuples for bounded arguments, so an over-long argument
/// is [`XdrError::TooLong`] before anything is sent.
#[derive(Debug, Clone, Copy)]
pub struct Bounded<T>(pub T, pub usize);

impl<T: EncodeBounded> Encode for Bounded<T> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        self.0.encode_bounded(self.1, out)
    }
}

/// A box encodes as its value: recursive types (`struct list { T value;
/// list *next; }`) hold their optional tail as `Option<Box<_>>`.
impl<T: Encode + ?Sized> Encode for Box<T> {
    fn encode(&self, out: &mut BytesMut) -> Result<(), XdrError> {
        (**self).encode(out)
    }
}
impl<T: Decode> Decode for Box<T> {
    fn decode(r: &mut Reader<'_>) -> Result<Self, XdrError> {
        T::decode(r).map(Box::new)
    }
}

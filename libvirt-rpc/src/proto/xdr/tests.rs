//! Property round-trips for every construct, decoding of arbitrary bytes,
//! and the bound checks.

use super::*;
use crate::proto::limits::REMOTE_AUTH_TYPE_LIST_MAX;
use proptest::prelude::*;

/// Round trip, 4-byte alignment, and every truncation refused.
fn rt<T: Encode + Decode + PartialEq + std::fmt::Debug>(v: T) {
    let b = to_bytes(&v).unwrap();
    assert_eq!(b.len() % 4, 0, "XDR is 4-byte aligned");
    assert_eq!(from_bytes::<T>(&b).unwrap(), v);
    for cut in 0..b.len() {
        assert!(from_bytes::<T>(&b[..cut]).is_err(), "cut at {cut}");
    }
}

/// Round trip by bytes, for values unequal to themselves (NaN).
fn rt_bytes<T: Encode + Decode>(v: T) {
    let b = to_bytes(&v).unwrap();
    let back: T = from_bytes(&b).unwrap();
    assert_eq!(to_bytes(&back).unwrap(), b);
}

const NAME_MAX: usize = 5;
const LIST_MAX: usize = 3;

crate::xdr_struct! {
    /// Every construct with a maximum of its own, and the fixed ones.
    struct Bounded {
        name<NAME_MAX>: String,
        maybe_name<NAME_MAX>: Option<String>,
        blob<NAME_MAX>: Vec<u8>,
        list<LIST_MAX>: Vec<u32>,
        auth<REMOTE_AUTH_TYPE_LIST_MAX>: Vec<i32>,
        fixed_blob: [u8; 3],
        fixed_list: [i16; 2],
        model: [i8; 4],
        next: Option<Box<Bounded>>,
    }
}

crate::xdr_union! {
    /// Arms of every shape.
    #[derive(Eq)]
    enum Shape switch (u32) {
        Word(u32) = 0,
        Name<NAME_MAX>(String) = 1,
        Nothing = 2,
        Pair((i64, bool)) = 0xffff_ffff,
    }
}

crate::xdr_struct! {
    #[xdr(no_eq)]
    /// Floats have no `Eq`.
    struct Floats {
        single: f32,
        double: f64,
    }
}

fn bounded() -> impl Strategy<Value = Bounded> {
    (
        "[a-z]{0,5}",
        proptest::option::of("[a-z]{0,5}"),
        proptest::collection::vec(any::<u8>(), 0..=NAME_MAX),
        proptest::collection::vec(any::<u32>(), 0..=LIST_MAX),
        proptest::collection::vec(any::<i32>(), 0..=4),
        any::<[u8; 3]>(),
        any::<[i16; 2]>(),
        any::<[i8; 4]>(),
    )
        .prop_map(
            |(name, maybe_name, blob, list, auth, fixed_blob, fixed_list, model)| Bounded {
                name,
                maybe_name,
                blob,
                list,
                auth,
                fixed_blob,
                fixed_list,
                model,
                next: None,
            },
        )
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        any::<u32>().prop_map(Shape::Word),
        "[a-z]{0,5}".prop_map(Shape::Name),
        Just(Shape::Nothing),
        any::<(i64, bool)>().prop_map(Shape::Pair),
    ]
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
    fn f32_round_trips_bit_for_bit(bits: u32) {
        let v = f32::from_bits(bits);
        prop_assert_eq!(&to_bytes(&v).unwrap()[..], &bits.to_be_bytes());
        prop_assert_eq!(from_bytes::<f32>(&bits.to_be_bytes()).unwrap().to_bits(), bits);
    }
    #[test]
    fn f64_round_trips_bit_for_bit(bits: u64) {
        let v = f64::from_bits(bits);
        prop_assert_eq!(&to_bytes(&v).unwrap()[..], &bits.to_be_bytes());
        prop_assert_eq!(from_bytes::<f64>(&bits.to_be_bytes()).unwrap().to_bits(), bits);
    }
    #[test]
    fn floats_struct_round_trips(single: f32, double: f64) { rt_bytes(Floats { single, double }) }
    #[test]
    fn narrow_ints_round_trip(c: i8, s: i16, us: u16) { rt(c); rt(s); rt(us) }
    #[test]
    fn narrow_ints_refuse_wide_words(word in 0x1_0000u32..) {
        let invalid = |r: Result<(), XdrError>| matches!(r, Err(XdrError::Invalid { .. }));
        prop_assert!(invalid(from_bytes::<u16>(&word.to_be_bytes()).map(drop)), "{}", word);
        // A negative value's word is its sign extension (0xFFFF8000.. for
        // i16, 0xFFFFFF80.. for i8): those are valid, every other wide
        // word is not.
        if word < 0xFFFF_8000 {
            prop_assert!(invalid(from_bytes::<i16>(&word.to_be_bytes()).map(drop)), "{}", word);
        }
        if word < 0xFFFF_FF80 {
            prop_assert!(invalid(from_bytes::<i8>(&word.to_be_bytes()).map(drop)), "{}", word);
        }
    }
    #[test]
    fn negative_narrow_ints_are_sign_extended_words(v: i16) {
        let word = i32::from(v) as u32;
        prop_assert_eq!(from_bytes::<i16>(&word.to_be_bytes()).unwrap(), v);
    }
    #[test]
    fn bool_round_trips(v: bool) { rt(v) }
    #[test]
    fn string_round_trips(v in ".{0,40}") { rt(v) }
    #[test]
    fn option_round_trips(v: Option<String>) { rt(v) }
    #[test]
    fn vec_round_trips(v: Vec<u32>) { rt(v) }
    #[test]
    fn opaque_round_trips(v in proptest::collection::vec(any::<u8>(), 0..40)) {
        let wire = to_bytes(&v).unwrap();
        prop_assert_eq!(wire.len(), 4 + v.len().div_ceil(4) * 4);
        prop_assert_eq!(&wire[4..4 + v.len()], &v[..]);
        rt(v)
    }
    #[test]
    fn fixed_opaque_round_trips(a: [u8; 16], b: [u8; 5], c: [u8; 1]) {
        prop_assert_eq!(to_bytes(&b).unwrap().len(), 8);
        rt(a); rt(b); rt(c)
    }
    #[test]
    fn fixed_array_round_trips(a: [u64; 3], b: [i32; 5]) {
        prop_assert_eq!(to_bytes(&a).unwrap().len(), 24);
        rt(a); rt(b)
    }
    #[test]
    fn fixed_array_of_strings_round_trips(a in [".{0,8}", ".{0,8}"]) { rt(a) }
    #[test]
    fn optional_data_round_trips(a: Option<u64>, b: Option<[u8; 16]>, c: Option<Vec<i32>>) {
        rt(a); rt(b); rt(c)
    }
    #[test]
    fn bounded_fields_round_trip(v in bounded(), w in bounded()) {
        rt(Bounded { next: Some(Box::new(w)), ..v })
    }
    #[test]
    fn unions_round_trip(v in shape()) { rt(v) }
    #[test]
    fn unknown_discriminants_are_refused(d in 3u32..0xffff_ffff) {
        let mut wire = d.to_be_bytes().to_vec();
        wire.extend_from_slice(&[0; 12]);
        prop_assert_eq!(
            from_bytes::<Shape>(&wire).unwrap_err(),
            XdrError::UnknownDiscriminant { union: "Shape", value: i64::from(d) }
        );
    }
    #[test]
    fn decoding_garbage_never_panics(b: Vec<u8>) {
        let _ = from_bytes::<Vec<Option<String>>>(&b);
        let _ = from_bytes::<(u64, bool, i32)>(&b);
        let _ = from_bytes::<(f32, f64, i8, i16, u16)>(&b);
        let _ = from_bytes::<Vec<u8>>(&b);
        let _ = from_bytes::<[u8; 7]>(&b);
        let _ = from_bytes::<[String; 3]>(&b);
        let _ = from_bytes::<Option<Vec<[u8; 16]>>>(&b);
        let _ = from_bytes::<Bounded>(&b);
        let _ = from_bytes::<Vec<Shape>>(&b);
    }
    #[test]
    fn decoding_garbage_after_a_valid_prefix_never_panics(v in bounded(), tail: Vec<u8>, cut: usize) {
        let mut wire = to_bytes(&v).unwrap().to_vec();
        wire.truncate(cut % (wire.len() + 1));
        wire.extend_from_slice(&tail);
        let _ = from_bytes::<Bounded>(&wire);
    }
}

#[test]
fn string_is_padded() {
    assert_eq!(&to_bytes("abcde").unwrap()[..], b"\0\0\0\x05abcde\0\0\0");
}

#[test]
fn fixed_opaque_is_padded_without_a_length() {
    assert_eq!(
        &to_bytes(&[1u8, 2, 3, 4, 5]).unwrap()[..],
        &[1, 2, 3, 4, 5, 0, 0, 0]
    );
}

#[test]
fn char_arrays_take_a_word_per_char() {
    // `char model[32]` as rpcgen sends it: 4 bytes per char, sign-extended.
    let wire = to_bytes(&[b'x' as i8, -1]).unwrap();
    assert_eq!(&wire[..], &[0, 0, 0, b'x', 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn huge_list_length_is_rejected_before_allocating() {
    let e = from_bytes::<Vec<u64>>(&[0xff, 0xff, 0xff, 0xf0]).unwrap_err();
    assert!(matches!(e, XdrError::Truncated { .. }), "{e:?}");
    let e = from_bytes::<[u64; 4096]>(&[0; 64]).unwrap_err();
    assert!(matches!(e, XdrError::Truncated { .. }), "{e:?}");
}

#[test]
fn string_over_limit_is_rejected() {
    let e = from_bytes::<String>(&[0x00, 0x40, 0x00, 0x01]).unwrap_err();
    assert!(matches!(e, XdrError::TooLong { .. }), "{e:?}");
    let long = "x".repeat(STRING_MAX + 1);
    assert!(to_bytes(&long).is_err());
}

/// A field's own maximum: the length word alone is enough to refuse, so
/// nothing was read or allocated past it.
#[test]
fn field_maxima_are_enforced_both_ways() {
    let ok = Bounded {
        name: "abcde".into(),
        maybe_name: None,
        blob: vec![],
        list: vec![],
        auth: vec![],
        fixed_blob: [0; 3],
        fixed_list: [0; 2],
        model: [0; 4],
        next: None,
    };
    let mut cases: Vec<(Bounded, usize, usize)> = vec![
        (
            Bounded {
                name: "abcdef".into(),
                ..ok.clone()
            },
            6,
            NAME_MAX,
        ),
        (
            Bounded {
                maybe_name: Some("abcdef".into()),
                ..ok.clone()
            },
            6,
            NAME_MAX,
        ),
        (
            Bounded {
                blob: vec![0; 6],
                ..ok.clone()
            },
            6,
            NAME_MAX,
        ),
        (
            Bounded {
                list: vec![0; 4],
                ..ok.clone()
            },
            4,
            LIST_MAX,
        ),
        (
            Bounded {
                auth: vec![0; 21],
                ..ok.clone()
            },
            21,
            REMOTE_AUTH_TYPE_LIST_MAX,
        ),
    ];
    cases.push((
        Bounded {
            next: Some(Box::new(cases[0].0.clone())),
            ..ok.clone()
        },
        6,
        NAME_MAX,
    ));
    rt(ok.clone());
    for (value, len, max) in cases {
        assert_eq!(
            to_bytes(&value).unwrap_err(),
            XdrError::TooLong { len, max },
            "{value:?}"
        );
        // The same bytes as the value would have: encode with the limits
        // lifted by writing the fields by hand.
        let mut wire = BytesMut::new();
        put_opaque(&mut wire, value.name.as_bytes(), usize::MAX).unwrap();
        match &value.maybe_name {
            None => wire.put_u32(0),
            Some(n) => {
                wire.put_u32(1);
                put_opaque(&mut wire, n.as_bytes(), usize::MAX).unwrap();
            }
        }
        put_opaque(&mut wire, &value.blob, usize::MAX).unwrap();
        put_list_len(&mut wire, value.list.len(), usize::MAX).unwrap();
        value.list.iter().for_each(|v| wire.put_u32(*v));
        put_list_len(&mut wire, value.auth.len(), usize::MAX).unwrap();
        value.auth.iter().for_each(|v| wire.put_i32(*v));
        if value.next.is_none() {
            wire.put_slice(
                &to_bytes(&(value.fixed_blob, value.fixed_list, value.model, false)).unwrap(),
            );
            assert_eq!(
                from_bytes::<Bounded>(&wire).unwrap_err(),
                XdrError::TooLong { len, max }
            );
        }
    }
}

#[test]
fn a_bounded_list_is_refused_by_its_count_alone() {
    // name "", no maybe_name, blob of 0, then a list claiming 4 elements
    // with no bytes behind it: TooLong (the maximum), not Truncated.
    let wire = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4];
    assert_eq!(
        from_bytes::<Bounded>(&wire).unwrap_err(),
        XdrError::TooLong {
            len: 4,
            max: LIST_MAX
        }
    );
}

#[test]
fn union_arms_keep_their_maxima() {
    assert_eq!(
        to_bytes(&Shape::Name("abcdef".into())).unwrap_err(),
        XdrError::TooLong {
            len: 6,
            max: NAME_MAX
        }
    );
    assert_eq!(
        from_bytes::<Shape>(&[0, 0, 0, 1, 0, 0, 0, 6]).unwrap_err(),
        XdrError::TooLong {
            len: 6,
            max: NAME_MAX
        }
    );
    assert_eq!(Shape::Pair((1, true)).discriminant(), 0xffff_ffff);
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

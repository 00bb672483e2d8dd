//! A stable-Rust mutation fuzzer for the packet decoder and every payload
//! type (no nightly, no libFuzzer): seeds are the packets captured from the
//! real daemon under `libvirt-rpc/testdata/packets/`; inputs are mutated (bit flips,
//! interesting words at aligned offsets, truncation, insertion, splicing)
//! and fed to the framing decoder and to every payload decoder. Any panic is
//! a finding: the input is written to `target/fuzz-crash-*.bin` and the run
//! fails. Inputs whose outcome signature (which decoders accept, which
//! errors) is new join the corpus, a cheap stand-in for coverage feedback.
//!
//! `cargo xtask fuzz libvirt-rpc --seconds 600`, or
//! `cargo run --release -p libvirt-rpc-probes --bin fuzz_decode -- --seconds 600`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::panic;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use libvirt_rpc::proto::limits::REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX;
use libvirt_rpc::proto::packet::{self, HEADER_SIZE, LEN_SIZE};
use libvirt_rpc::proto::remote_error::WireError;
use libvirt_rpc::proto::xdr::{self, Decode, Encode};
use libvirt_rpc::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

/// Decodes `b` as `T`; when it decodes, re-encoding must succeed (every
/// maximum that decoding enforced, encoding accepts) and give bytes that
/// decode and encode to the same bytes again (compared as bytes: a NaN in a
/// typed parameter is unequal to itself). Returns a bit of the outcome
/// signature.
fn probe<T: Decode + Encode>(b: &[u8]) -> u64 {
    match xdr::from_bytes::<T>(b) {
        Ok(v) => {
            let again = xdr::to_bytes(&v).expect("re-encode");
            let back = xdr::from_bytes::<T>(&again).expect("re-decode");
            assert_eq!(
                xdr::to_bytes(&back).expect("re-encode"),
                again,
                "round trip"
            );
            1
        }
        Err(xdr::XdrError::Truncated { .. }) => 2,
        Err(xdr::XdrError::TooLong { .. }) => 3,
        Err(xdr::XdrError::Invalid { .. }) => 4,
        Err(xdr::XdrError::UnknownDiscriminant { .. }) => 5,
        Err(_) => 6,
    }
}

xdr_struct! {
    #[xdr(no_eq)]
    /// Every codec construct in one value, each variable-length one with a
    /// maximum of its own (declared from outside the crate, as a user
    /// would).
    struct Constructs {
        float: f32,
        double: f64,
        hyper: i64,
        narrow: (i8, i16, u16),
        name<NAME_MAX>: String,
        blob<BLOB_MAX>: Vec<u8>,
        uuid: [u8; 16],
        odd: [u8; 5],
        model: [i8; 4],
        pair: [Option<u32>; 2],
        maybe<NAME_MAX>: Option<String>,
        params<REMOTE_DOMAIN_MEMORY_PARAMETERS_MAX>: Vec<TypedParam>,
        arm: Arm,
    }
}

xdr_union! {
    /// A union with a void arm, a bounded arm and a signed discriminant.
    enum Arm switch (i32) {
        Nothing = 0,
        Name<NAME_MAX>(String) = -1,
        Value(TypedParamValue) = 7,
    }
}

const NAME_MAX: usize = 12;
const BLOB_MAX: usize = 64;

/// Every event message procedure this crate types (`events::Event`).
const EVENT_PROCEDURES: [i32; 35] = [
    318, 319, 320, 321, 322, 323, 324, 325, 326, 327, 328, 329, 330, 331, 332, 333, 339, 346, 348,
    354, 359, 363, 367, 379, 385, 423, 438, 370, 373, 315, 446, 376, 377, 382, 383,
];

/// Decodes `b` as every typed event message (and one unknown kind).
fn event_signature(b: &[u8]) -> u64 {
    let payload = bytes::Bytes::copy_from_slice(b);
    let mut sig = 0u64;
    for procedure in EVENT_PROCEDURES.into_iter().chain([449]) {
        let s = match RawEvent::new(procedure, payload.clone()).map(|r| r.decode()) {
            None => 0,
            Some(Ok(_)) => 1,
            Some(Err(xdr::XdrError::Truncated { .. })) => 2,
            Some(Err(_)) => 3,
        };
        sig = sig.wrapping_mul(5).wrapping_add(s);
    }
    sig
}

/// Decodes `b` as every generated protocol type; the number that decode.
fn every_remote_type(b: &[u8]) -> u64 {
    macro_rules! probe_all {
        ($($t:ty),*) => {
            0 $(+ u64::from(probe::<$t>(b) == 1))*
        };
    }
    libvirt_rpc::__for_each_remote_type!(probe_all)
}

fn payload_signature(b: &[u8]) -> u64 {
    let mut sig = event_signature(b);
    for s in [
        probe::<WireError>(b),
        probe::<Domain>(b),
        probe::<StorageVol>(b),
        every_remote_type(b),
        probe::<TypedParamValue>(b),
        probe::<TypedParam>(b),
        probe::<Vec<TypedParam>>(b),
        probe::<Constructs>(b),
        probe::<Vec<Arm>>(b),
        probe::<StoragePoolInfo>(b),
        probe::<StorageVolInfo>(b),
        probe::<DomainStateInfo>(b),
        probe::<(i32, LifecycleEvent)>(b),
        probe::<String>(b),
        probe::<Vec<i32>>(b),
        probe::<u64>(b),
    ] {
        sig = sig.wrapping_mul(7).wrapping_add(s);
    }
    sig
}

/// The fuzz target: frames, then payloads.
fn target(data: &[u8]) -> u64 {
    let mut buf = BytesMut::from(data);
    let mut sig = 0u64;
    for _ in 0..64 {
        match packet::decode_frame(&mut buf) {
            Ok(Some(p)) => {
                sig = sig
                    .wrapping_mul(31)
                    .wrapping_add(u64::from(p.header.kind.to_u32()) << 8)
                    .wrapping_add(u64::from(p.header.status.to_u32()));
                sig = sig
                    .wrapping_mul(131)
                    .wrapping_add(payload_signature(&p.payload));
            }
            Ok(None) => {
                sig = sig.wrapping_add(1000);
                break;
            }
            Err(_) => {
                sig = sig.wrapping_add(2000);
                break;
            }
        }
    }
    if data.len() > LEN_SIZE + HEADER_SIZE {
        sig = sig
            .wrapping_mul(17)
            .wrapping_add(payload_signature(&data[LEN_SIZE + HEADER_SIZE..]));
    }
    sig
}

/// Seeds the captured traffic lacks: payloads of every codec construct
/// (typed parameters of each type, the `Constructs` struct, the union's
/// arms), each behind a length word and a zero header so that both the
/// framing and the payload decoders see them.
fn synthetic_seeds() -> Vec<Vec<u8>> {
    let values = [
        TypedParamValue::Int(-7),
        TypedParamValue::UInt(7),
        TypedParamValue::LLong(-1 << 40),
        TypedParamValue::ULLong(1 << 40),
        TypedParamValue::Double(0.25),
        TypedParamValue::Boolean(true),
        TypedParamValue::String("balloon.current".into()),
    ];
    let params: Vec<TypedParam> = values
        .iter()
        .enumerate()
        .map(|(i, v)| TypedParam::new(format!("field.{i}"), v.clone()))
        .collect();
    let constructs = Constructs {
        float: 1.5,
        double: f64::NAN,
        hyper: -2,
        narrow: (-1, -300, 65535),
        name: "domain-1".into(),
        blob: vec![1, 2, 3, 4, 5],
        uuid: [9; 16],
        odd: [1, 2, 3, 4, 5],
        model: [b'x' as i8, 0, -1, 1],
        pair: [Some(3), None],
        maybe: Some("x".into()),
        params: params.clone(),
        arm: Arm::Name("arm".into()),
    };
    let mut payloads = vec![
        xdr::to_bytes(&params).expect("seed"),
        xdr::to_bytes(&constructs).expect("seed"),
        xdr::to_bytes(&vec![
            Arm::Nothing,
            Arm::Value(TypedParamValue::Double(-0.0)),
        ])
        .expect("seed"),
    ];
    payloads.extend(values.iter().map(|v| xdr::to_bytes(v).expect("seed")));
    payloads
        .into_iter()
        .map(|payload| {
            let mut seed = ((LEN_SIZE + HEADER_SIZE + payload.len()) as u32)
                .to_be_bytes()
                .to_vec();
            seed.resize(LEN_SIZE + HEADER_SIZE, 0);
            seed.extend_from_slice(&payload);
            seed
        })
        .collect()
}

const WORDS: [u32; 12] = [
    0,
    1,
    2,
    3,
    4,
    0x7f,
    0x80,
    0xff,
    0xffff,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
];

fn mutate(rng: &mut Rng, corpus: &[Vec<u8>], input: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(4) {
        match rng.below(8) {
            0 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] ^= 1 << rng.below(8);
            }
            1 if input.len() >= 4 => {
                let i = rng.below(input.len() / 4) * 4;
                let w = if rng.below(2) == 0 {
                    WORDS[rng.below(WORDS.len())]
                } else {
                    (input.len() as u32)
                        .wrapping_add(rng.below(9) as u32)
                        .wrapping_sub(4)
                };
                input[i..i + 4].copy_from_slice(&w.to_be_bytes());
            }
            2 if !input.is_empty() => input.truncate(rng.below(input.len())),
            3 => {
                let i = rng.below(input.len() + 1);
                let n = 1 + rng.below(16);
                let fill = rng.next() as u8;
                input.splice(i..i, std::iter::repeat_n(fill, n));
            }
            4 if input.len() > 1 => {
                let a = rng.below(input.len());
                let b = a + rng.below(input.len() - a);
                input.drain(a..b);
            }
            5 if !corpus.is_empty() => {
                let other = &corpus[rng.below(corpus.len())];
                let cut = rng.below(input.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[rng.below(other.len() + 1)..]);
            }
            6 if !input.is_empty() => {
                let i = rng.below(input.len());
                input[i] = WORDS[rng.below(WORDS.len())] as u8;
            }
            _ => {
                // Fix up the length word so the frame parses and the payload
                // decoders get exercised.
                if input.len() >= 4 {
                    let len = input.len() as u32;
                    input[..4].copy_from_slice(&len.to_be_bytes());
                }
            }
        }
    }
}

fn main() {
    let mut seconds = 60u64;
    let mut corpus_dir = libvirt_rpc_probes::packets_dir();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds N")
            }
            "--corpus" => corpus_dir = args.next().map(PathBuf::from).expect("--corpus DIR"),
            other => panic!("unknown argument {other}"),
        }
    }
    let mut corpus: Vec<Vec<u8>> = std::fs::read_dir(&corpus_dir)
        .expect("corpus dir")
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .collect();
    assert!(
        !corpus.is_empty(),
        "empty corpus in {}",
        corpus_dir.display()
    );
    corpus.extend(synthetic_seeds());
    let seeds = corpus.len();
    panic::set_hook(Box::new(|_| {}));
    let mut seen = HashSet::new();
    for c in &corpus {
        seen.insert(target(c));
    }
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
        | 1;
    let mut rng = Rng(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut execs = 0u64;
    let mut last_report = Instant::now();
    while Instant::now() < deadline {
        for _ in 0..256 {
            let mut input = corpus[rng.below(corpus.len())].clone();
            mutate(&mut rng, &corpus, &mut input);
            let r = panic::catch_unwind(|| target(&input));
            execs += 1;
            match r {
                Ok(sig) => {
                    if seen.insert(sig) && corpus.len() < 20_000 {
                        corpus.push(input);
                    }
                }
                Err(e) => {
                    let path = libvirt_rpc_probes::workspace_root()
                        .join(format!("target/fuzz-crash-{seed:x}-{execs}.bin"));
                    let _ = std::fs::write(&path, &input);
                    let msg = e
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    eprintln!(
                        "CRASH after {execs} execs: {msg}; input saved to {}",
                        path.display()
                    );
                    std::process::exit(1);
                }
            }
        }
        if last_report.elapsed() > Duration::from_secs(30) {
            eprintln!(
                "fuzz: {execs} execs, corpus {}, {:.0}/s",
                corpus.len(),
                execs as f64 / started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
    }
    println!(
        "fuzz_decode: {execs} execs in {:.0?} ({:.0}/s), no crash; corpus {seeds} seeds -> {} inputs (seed {seed:#x})",
        started.elapsed(),
        execs as f64 / started.elapsed().as_secs_f64(),
        corpus.len()
    );
}

//! Packet header and framing: `length (counts itself) | header | payload`.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::xdr::{Encode, XdrError};

/// libvirt's remote program (`REMOTE_PROGRAM`).
pub const REMOTE_PROGRAM: u32 = 0x2000_8086;
/// Version of the remote program.
pub const REMOTE_VERSION: u32 = 1;
/// The keepalive program (`"keep"`).
pub const KEEPALIVE_PROGRAM: u32 = 0x6b65_6570;
/// Version of the keepalive program.
pub const KEEPALIVE_VERSION: u32 = 1;
/// Keepalive procedure: ping.
pub const KEEPALIVE_PING: i32 = 1;
/// Keepalive procedure: pong.
pub const KEEPALIVE_PONG: i32 = 2;

/// Size of the length word.
pub const LEN_SIZE: usize = 4;
/// Size of the serialised header.
pub const HEADER_SIZE: usize = 24;
/// Largest message current libvirt accepts, excluding the length word
/// (`VIR_NET_MESSAGE_MAX`).
pub const MESSAGE_MAX: usize = 33_554_432;
/// Largest payload (`VIR_NET_MESSAGE_PAYLOAD_MAX`).
pub const PAYLOAD_MAX: usize = MESSAGE_MAX - HEADER_SIZE;
/// The payload size every libvirt (old and new) accepts; streams are sent in
/// chunks of at most this size (`VIR_NET_MESSAGE_LEGACY_PAYLOAD_MAX` minus
/// the header).
pub const LEGACY_PAYLOAD_MAX: usize = 262_144 - HEADER_SIZE;

/// What a packet is (`virNetMessageType`). Non-exhaustive: libvirt may
/// add kinds (it did for fd passing and sparse streams).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MessageType {
    /// Client → server procedure call.
    Call,
    /// Server → client reply to a call.
    Reply,
    /// Asynchronous message (events, keepalive).
    Message,
    /// Stream data or stream control.
    Stream,
    /// Call carrying file descriptors (unix sockets only; not supported).
    CallWithFds,
    /// Reply carrying file descriptors (not supported).
    ReplyWithFds,
    /// Stream hole (sparse streams).
    StreamHole,
}

impl MessageType {
    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            Self::Call => 0,
            Self::Reply => 1,
            Self::Message => 2,
            Self::Stream => 3,
            Self::CallWithFds => 4,
            Self::ReplyWithFds => 5,
            Self::StreamHole => 6,
        }
    }

    /// Parses the wire value.
    ///
    /// # Errors
    /// [`XdrError::Invalid`] for an unknown type.
    pub fn from_u32(v: u32) -> Result<Self, XdrError> {
        Ok(match v {
            0 => Self::Call,
            1 => Self::Reply,
            2 => Self::Message,
            3 => Self::Stream,
            4 => Self::CallWithFds,
            5 => Self::ReplyWithFds,
            6 => Self::StreamHole,
            value => {
                return Err(XdrError::Invalid {
                    what: "message type",
                    value,
                });
            }
        })
    }
}

/// Outcome carried in a packet (`virNetMessageStatus`). Non-exhaustive,
/// like [`MessageType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Success, or end of a stream.
    Ok,
    /// Failure: the payload is an error.
    Error,
    /// Stream data follows.
    Continue,
}

impl Status {
    /// The wire value.
    pub fn to_u32(self) -> u32 {
        match self {
            Self::Ok => 0,
            Self::Error => 1,
            Self::Continue => 2,
        }
    }

    /// Parses the wire value.
    ///
    /// # Errors
    /// [`XdrError::Invalid`] for an unknown status.
    pub fn from_u32(v: u32) -> Result<Self, XdrError> {
        Ok(match v {
            0 => Self::Ok,
            1 => Self::Error,
            2 => Self::Continue,
            value => {
                return Err(XdrError::Invalid {
                    what: "message status",
                    value,
                });
            }
        })
    }
}

/// The 24-byte packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Program number ([`REMOTE_PROGRAM`], [`KEEPALIVE_PROGRAM`], ...).
    pub program: u32,
    /// Program version.
    pub version: u32,
    /// Procedure number within the program.
    pub procedure: i32,
    /// Packet type.
    pub kind: MessageType,
    /// Serial matching a reply or stream packet to its call (0 for events).
    pub serial: u32,
    /// Status.
    pub status: Status,
}

impl Header {
    /// A header for the remote program.
    pub fn remote(procedure: i32, kind: MessageType, serial: u32, status: Status) -> Self {
        Self {
            program: REMOTE_PROGRAM,
            version: REMOTE_VERSION,
            procedure,
            kind,
            serial,
            status,
        }
    }

    /// The serialised header.
    pub fn to_bytes(&self) -> [u8; HEADER_SIZE] {
        let mut out = [0u8; HEADER_SIZE];
        let words = [
            self.program,
            self.version,
            self.procedure as u32,
            self.kind.to_u32(),
            self.serial,
            self.status.to_u32(),
        ];
        for (dst, w) in out.chunks_exact_mut(4).zip(words) {
            dst.copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    fn put(&self, out: &mut BytesMut) {
        out.put_u32(self.program);
        out.put_u32(self.version);
        out.put_i32(self.procedure);
        out.put_u32(self.kind.to_u32());
        out.put_u32(self.serial);
        out.put_u32(self.status.to_u32());
    }

    /// Parses a header from the first [`HEADER_SIZE`] bytes.
    ///
    /// # Errors
    /// [`XdrError`] when too short or a field is out of range.
    pub fn parse(mut b: &[u8]) -> Result<Self, XdrError> {
        if b.len() < HEADER_SIZE {
            return Err(XdrError::Truncated {
                offset: 0,
                needed: HEADER_SIZE - b.len(),
            });
        }
        let program = b.get_u32();
        let version = b.get_u32();
        let procedure = b.get_i32();
        let kind = MessageType::from_u32(b.get_u32())?;
        let serial = b.get_u32();
        let status = Status::from_u32(b.get_u32())?;
        Ok(Self {
            program,
            version,
            procedure,
            kind,
            serial,
            status,
        })
    }
}

/// One decoded packet: header and undecoded payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The header.
    pub header: Header,
    /// The payload (shares the receive buffer; no copy).
    pub payload: Bytes,
}

/// Why the byte stream could not be split into packets. Every variant means
/// the stream is out of sync and the connection must be dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The length word is smaller than a header.
    #[error("packet length {0} is smaller than a header")]
    TooShort(usize),
    /// The length word exceeds the protocol maximum.
    #[error("packet length {len} exceeds the maximum of {max}")]
    TooLong {
        /// The declared length.
        len: usize,
        /// The maximum accepted.
        max: usize,
    },
    /// The header is malformed.
    #[error("malformed packet header: {0}")]
    Header(#[from] XdrError),
}

/// Splits one packet off the front of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed; in that case `buf` has
/// reserved room for the rest of the packet, but only after the declared
/// length was checked against [`MESSAGE_MAX`].
///
/// # Errors
/// [`FrameError`] when the stream is not valid framing.
pub fn decode_frame(buf: &mut BytesMut) -> Result<Option<Packet>, FrameError> {
    let Some(len_bytes) = buf.get(..LEN_SIZE) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
    if len < LEN_SIZE + HEADER_SIZE {
        return Err(FrameError::TooShort(len));
    }
    if len > MESSAGE_MAX + LEN_SIZE {
        return Err(FrameError::TooLong {
            len,
            max: MESSAGE_MAX + LEN_SIZE,
        });
    }
    if buf.len() < len {
        buf.reserve(len - buf.len());
        return Ok(None);
    }
    let header = Header::parse(&buf[LEN_SIZE..LEN_SIZE + HEADER_SIZE])?;
    let mut frame = buf.split_to(len);
    frame.advance(LEN_SIZE + HEADER_SIZE);
    Ok(Some(Packet {
        header,
        payload: frame.freeze(),
    }))
}

/// Encodes a whole packet (length, header, XDR payload).
///
/// # Errors
/// [`XdrError::TooLong`] when the payload cannot be encoded or the packet
/// would exceed [`MESSAGE_MAX`].
pub fn encode_packet<T: Encode + ?Sized>(header: &Header, payload: &T) -> Result<Bytes, XdrError> {
    let mut out = BytesMut::with_capacity(LEN_SIZE + HEADER_SIZE + 64);
    out.put_u32(0);
    header.put(&mut out);
    payload.encode(&mut out)?;
    finish(out)
}

/// Encodes a packet whose payload is raw bytes (stream data).
///
/// # Errors
/// [`XdrError::TooLong`] when the packet would exceed [`MESSAGE_MAX`].
pub fn encode_raw(header: &Header, data: &[u8]) -> Result<Bytes, XdrError> {
    let mut out = BytesMut::with_capacity(LEN_SIZE + HEADER_SIZE + data.len());
    out.put_u32(0);
    header.put(&mut out);
    out.put_slice(data);
    finish(out)
}

fn finish(mut out: BytesMut) -> Result<Bytes, XdrError> {
    let len = out.len();
    if len > MESSAGE_MAX + LEN_SIZE {
        return Err(XdrError::TooLong {
            len,
            max: MESSAGE_MAX + LEN_SIZE,
        });
    }
    out[..LEN_SIZE].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(out.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = MessageType> {
        (0u32..7).prop_map(|v| MessageType::from_u32(v).unwrap())
    }
    fn status() -> impl Strategy<Value = Status> {
        (0u32..3).prop_map(|v| Status::from_u32(v).unwrap())
    }

    proptest! {
        #[test]
        fn packet_round_trips(program: u32, version: u32, procedure: i32, kind in kind(),
                              serial: u32, status in status(), data: Vec<u8>) {
            let h = Header { program, version, procedure, kind, serial, status };
            let wire = encode_raw(&h, &data).unwrap();
            let mut buf = BytesMut::from(&wire[..]);
            // Every strict prefix asks for more bytes.
            for cut in 0..wire.len() {
                let mut part = BytesMut::from(&wire[..cut]);
                prop_assert_eq!(decode_frame(&mut part).unwrap(), None);
            }
            let p = decode_frame(&mut buf).unwrap().unwrap();
            prop_assert_eq!(p.header, h);
            prop_assert_eq!(&p.payload[..], &data[..]);
            prop_assert!(buf.is_empty());
        }

        #[test]
        fn framing_garbage_never_panics(b: Vec<u8>) {
            let mut buf = BytesMut::from(&b[..]);
            while let Ok(Some(_)) = decode_frame(&mut buf) {}
        }
    }

    #[test]
    fn oversized_length_is_rejected_without_allocating() {
        let mut buf = BytesMut::from(&[0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            decode_frame(&mut buf),
            Err(FrameError::TooLong { .. })
        ));
        assert!(buf.capacity() < 1024);
    }

    #[test]
    fn short_length_is_rejected() {
        let mut buf = BytesMut::from(&[0, 0, 0, 8, 0, 0, 0, 0][..]);
        assert_eq!(decode_frame(&mut buf), Err(FrameError::TooShort(8)));
    }

    #[test]
    fn unknown_type_is_rejected() {
        let h = Header::remote(1, MessageType::Call, 1, Status::Ok);
        let wire = encode_raw(&h, &[]).unwrap();
        let mut bad = BytesMut::from(&wire[..]);
        bad[4 + 12..4 + 16].copy_from_slice(&9u32.to_be_bytes());
        assert!(matches!(
            decode_frame(&mut bad),
            Err(FrameError::Header(XdrError::Invalid { .. }))
        ));
    }
}

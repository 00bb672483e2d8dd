//! What a [`super::Script`] sees ([`Call`]) and answers ([`Reply`]).

use bytes::Bytes;

use crate::error_code::ErrorCode;
use crate::error_domain::ErrorDomain;
use crate::proto::packet::{Header, Packet};
use crate::proto::remote_error::WireError;
use crate::proto::xdr::{self, Decode, Encode, XdrError};

/// One call the client made, as the fake daemon received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    header: Header,
    payload: Bytes,
}

impl Call {
    pub(crate) fn new(p: Packet) -> Self {
        Self {
            header: p.header,
            payload: p.payload,
        }
    }

    /// The procedure number ([`crate::proc_num`]).
    pub fn procedure(&self) -> i32 {
        self.header.procedure
    }

    /// The packet header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The arguments, undecoded.
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The arguments decoded as `T` (the procedure's `_args` type, e.g.
    /// `String` for `DOMAIN_LOOKUP_BY_NAME`, a tuple for several).
    ///
    /// # Errors
    /// [`XdrError`] when the payload is not exactly one `T`.
    pub fn args<T: Decode>(&self) -> Result<T, XdrError> {
        xdr::from_bytes(&self.payload)
    }
}

/// How the fake daemon answers a call.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Reply {
    /// REPLY / OK with this XDR payload (see [`Reply::ok`]).
    Ok(Bytes),
    /// REPLY / ERROR: the call fails with this libvirt error.
    Error(WireError),
    /// Opens a download stream: REPLY / OK, then the bytes as STREAM data
    /// in packets of at most 256 KiB, then end of stream; the client's
    /// finish is confirmed.
    Download(Bytes),
    /// Opens an upload stream: REPLY / OK, then the data is collected
    /// (see [`super::FakeDaemon::uploads`]) and the client's finish is
    /// confirmed; with `fail_after`, once that many bytes arrived the
    /// daemon fails the stream with the error instead.
    Upload {
        /// Fail the stream once this many bytes arrived, with this error.
        fail_after: Option<(u64, WireError)>,
    },
    /// Never answers (the call runs into its deadline).
    Silence,
    /// Drops the link instead of answering (every pending call fails with
    /// [`crate::Error::Disconnected`]).
    Disconnect,
}

impl Reply {
    /// REPLY / OK carrying `body`, encoded now: the procedure's `_ret`
    /// type (`()` for none, [`crate::remote::ConnectListAllDomainsRet`] for
    /// `CONNECT_LIST_ALL_DOMAINS`, ...).
    ///
    /// A body that cannot be encoded (a string over libvirt's limit)
    /// becomes an [`ErrorCode::InternalError`] reply naming the reason, so
    /// the test sees it instead of a panic.
    pub fn ok<T: Encode + ?Sized>(body: &T) -> Self {
        match xdr::to_bytes(body) {
            Ok(b) => Self::Ok(b),
            Err(e) => Self::error(
                ErrorCode::InternalError,
                ErrorDomain::Rpc,
                format!("fake daemon: cannot encode the scripted reply: {e}"),
            ),
        }
    }

    /// REPLY / ERROR with `code`, `domain` and `message`, as libvirtd
    /// sends them (`Reply::error(ErrorCode::NoDomain, ErrorDomain::Qemu,
    /// "Domain not found")`).
    pub fn error(code: ErrorCode, domain: ErrorDomain, message: impl Into<String>) -> Self {
        Self::Error(WireError::new(code.to_i32(), domain.to_i32(), message))
    }

    /// The download stream [`Reply::Download`] of `data`.
    pub fn download(data: impl Into<Bytes>) -> Self {
        Self::Download(data.into())
    }

    /// An upload stream that accepts everything ([`Reply::Upload`]).
    pub fn upload() -> Self {
        Self::Upload { fail_after: None }
    }

    /// An upload stream the daemon fails with `code`, `domain` and
    /// `message` once `bytes` arrived (a full disk, a vanished volume).
    pub fn upload_failing_after(
        bytes: u64,
        code: ErrorCode,
        domain: ErrorDomain,
        message: impl Into<String>,
    ) -> Self {
        Self::Upload {
            fail_after: Some((
                bytes,
                WireError::new(code.to_i32(), domain.to_i32(), message),
            )),
        }
    }
}

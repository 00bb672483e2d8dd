//! The crate's one error type.

use std::time::Duration;

use provider_api::ErrorClass;

/// Everything that can go wrong in this crate.
///
/// Variants carry structured fields so callers can match on them; their
/// `Display` describes this crate's layer only and never contains cloud-init
/// user data. [`Error::is_permanent`] says whether retrying the same request
/// can help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration or request value was rejected before it could reach a
    /// file name, an XML document or a YAML file.
    #[error("invalid {field}: {reason}")]
    InvalidValue {
        /// Which value (e.g. `"domain name"`, `"bridge"`).
        field: &'static str,
        /// Why it was rejected. Never contains the value when it is secret.
        reason: String,
    },

    /// Serialising the domain XML failed.
    #[error("cannot serialise domain XML")]
    XmlWrite(#[source] quick_xml::SeError),

    /// A domain XML or metadata dump could not be read.
    #[error("cannot parse libvirt XML: {reason}")]
    XmlRead {
        /// What was wrong with the document.
        reason: String,
    },

    /// An ownership mark exists but is incomplete, duplicated or malformed.
    /// Such a domain is treated as foreign: never modified, never deleted.
    #[error("malformed ownership mark: {reason}")]
    MalformedMark {
        /// What was wrong with the mark.
        reason: String,
    },

    /// The cloud-init seed would exceed its size limit.
    #[error("cloud-init seed ISO would be {size} bytes, over the limit of {limit} bytes")]
    SeedTooLarge {
        /// Planned image size in bytes.
        size: u64,
        /// The configured limit in bytes.
        limit: u64,
    },

    /// The ISO writer failed.
    #[error("cannot build cloud-init seed ISO: {reason}")]
    SeedIso {
        /// The writer's message (file names only, never contents).
        reason: String,
    },

    /// The image server answered with a non-success status.
    #[error("image server answered HTTP {status}")]
    HttpStatus {
        /// The status code.
        status: u16,
    },

    /// The image is larger than the configured cap (declared by
    /// `Content-Length` or seen while streaming).
    #[error("image exceeds the size cap of {limit} bytes")]
    ImageTooLarge {
        /// The cap in bytes.
        limit: u64,
    },

    /// The downloaded bytes do not hash to the configured sha256.
    #[error("image sha256 mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The configured digest (hex).
        expected: String,
        /// The digest of the bytes received (hex).
        actual: String,
    },

    /// The body's length differs from its declared `Content-Length`.
    #[error("image body was {received} bytes, {declared} declared")]
    LengthMismatch {
        /// The declared length.
        declared: u64,
        /// The bytes received.
        received: u64,
    },

    /// A cached base's marker records a different digest, URL or format
    /// than the configuration now has for its key. The base is kept (running
    /// overlays may use it).
    #[error(
        "image {key}: {field} is {configured} in the config but the cached base was made from \
         {recorded}; editing an image in place is not supported - add a new image key and \
         point machine defaults or requests at it"
    )]
    ImageChanged {
        /// The image key.
        key: String,
        /// Which field changed: `sha256`, `url` or `format`.
        field: &'static str,
        /// The value the marker records.
        recorded: String,
        /// The value configured now.
        configured: String,
    },

    /// The download did not finish within its deadline.
    #[error("image download exceeded its deadline of {0:?}")]
    SourceDeadline(Duration),

    /// A fill stopped writing because its lease fence closed (the lease
    /// was lost, or heartbeats went unconfirmed too long): another process
    /// may judge the fill abandoned, so it must not write on.
    #[error("image fill stopped")]
    FillFenced(#[from] crate::images::Fenced),

    /// The HTTP client failed: connection refused or reset, body cut short,
    /// too many redirects, TLS failure.
    #[error("image download failed")]
    Source(#[source] reqwest::Error),
}

impl Error {
    /// The provider-API retry class of this error.
    ///
    /// Permanent: retrying the same request cannot succeed until an operator
    /// or user changes something (configuration, image, request). Transient:
    /// the network or a server may recover.
    pub fn class(&self) -> ErrorClass {
        let permanent = match self {
            Error::InvalidValue { .. }
            | Error::XmlWrite(_)
            | Error::MalformedMark { .. }
            | Error::SeedTooLarge { .. }
            | Error::SeedIso { .. }
            | Error::ImageTooLarge { .. }
            | Error::DigestMismatch { .. }
            | Error::ImageChanged { .. } => true,
            // 4xx other than timeouts and throttling will not fix
            // themselves; nor will a 3xx that was not followed (a redirect
            // to a scheme the client refuses).
            Error::HttpStatus { status } => {
                (300..500).contains(status) && *status != 408 && *status != 429
            }
            // Redirect loops and unusable URLs; everything else (connect,
            // reset, body cut short, TLS handshake) may recover.
            Error::Source(e) => e.is_redirect() || e.is_builder(),
            Error::XmlRead { .. }
            | Error::SourceDeadline(_)
            | Error::LengthMismatch { .. }
            | Error::FillFenced(_) => false,
        };
        if permanent {
            ErrorClass::Permanent
        } else {
            ErrorClass::Transient
        }
    }

    /// True when [`class`](Self::class) is Permanent.
    pub fn is_permanent(&self) -> bool {
        self.class() == ErrorClass::Permanent
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidValue {
            field,
            reason: reason.into(),
        }
    }
}

impl From<Error> for provider_api::Error {
    /// Keeps the class; the message is this error's chain (its own text and
    /// its sources'), with no source kept beside it, so a printed chain
    /// says each thing once. No variant's text carries user data.
    fn from(e: Error) -> Self {
        provider_api::Error::new(e.class(), provider_api::error::chain(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_converted_error_says_its_layer_once() {
        let e = Error::FillFenced(crate::images::Fenced::Lost);
        let api = provider_api::Error::from(e);
        assert_eq!(
            provider_api::error::chain(&api),
            "image fill stopped: the fill lease was lost (gone or taken by another fill)"
        );
    }

    #[test]
    fn http_status_classes() {
        assert!(Error::HttpStatus { status: 404 }.is_permanent());
        assert!(!Error::HttpStatus { status: 429 }.is_permanent());
        assert!(!Error::HttpStatus { status: 503 }.is_permanent());
        assert!(!Error::SourceDeadline(Duration::from_secs(1)).is_permanent());
        let api: provider_api::Error = Error::HttpStatus { status: 404 }.into();
        assert_eq!(api.class(), ErrorClass::Permanent);
        assert_eq!(api.to_string(), "image server answered HTTP 404");
        assert!(
            Error::DigestMismatch {
                expected: "a".into(),
                actual: "b".into()
            }
            .is_permanent()
        );
    }
}

//! The base image marker: a tiny volume written *last*, after the base has
//! been uploaded and its digest verified, recording what the base is.
//!
//! ```text
//! kvm2-base-marker 1
//! sha256 <64 hex digits>
//! url <the URL it was downloaded from>
//! format qcow2
//! size <bytes>
//! ```
//!
//! The marker is the commit point of the cache: a base without a valid
//! marker is never used. [`judge`] is the whole decision table, a pure
//! function of what the pool holds and what the configuration says:
//!
//! | base | marker | verdict |
//! |---|---|---|
//! | absent | absent | [`BaseState::Absent`]: download it |
//! | absent | present | [`BaseState::Debris`]: delete the marker, download |
//! | present | absent or unreadable | [`BaseState::Debris`]: delete both, download |
//! | present | digest, URL and format match | [`BaseState::Ready`] |
//! | present | digest, URL or format differ | [`Error::ImageChanged`] (Permanent): the operator must add a new key; the base is **not** deleted, overlays may use it |

use std::fmt;

use provider_api::Identifier;
use provider_api::config::values::{HttpUrl, Sha256Digest};
use provider_api::config::{ImageFormat, Kvm2Image};

use crate::Error;

/// First line of every marker, with the format version.
pub const MARKER_MAGIC: &str = "kvm2-base-marker 1";

/// Largest marker read; anything larger is not a marker.
pub const MAX_MARKER_LEN: usize = 4096;

/// What a marker records about its base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageMarker {
    /// Digest of the base's bytes, verified during the download.
    pub sha256: Sha256Digest,
    /// Where the base was downloaded from.
    pub url: HttpUrl,
    /// The base's disk format.
    pub format: ImageFormat,
    /// The base's size in bytes.
    pub size: u64,
}

impl ImageMarker {
    /// The marker's bytes, as uploaded into the marker volume.
    pub fn render(&self) -> Vec<u8> {
        format!(
            "{MARKER_MAGIC}\nsha256 {}\nurl {}\nformat {}\nsize {}\n",
            self.sha256, self.url, self.format, self.size
        )
        .into_bytes()
    }

    /// Parses marker bytes; `None` for anything [`render`](Self::render)
    /// would not have written.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.len() > MAX_MARKER_LEN {
            return None;
        }
        let text = std::str::from_utf8(bytes).ok()?;
        let body = text.strip_suffix('\n')?;
        let mut lines = body.split('\n');
        if lines.next()? != MARKER_MAGIC {
            return None;
        }
        let mut field =
            |name: &str| -> Option<&str> { lines.next()?.strip_prefix(name)?.strip_prefix(' ') };
        let sha256 = Sha256Digest::parse(field("sha256")?).ok()?;
        let url = HttpUrl::parse(field("url")?).ok()?;
        let format = match field("format")? {
            "qcow2" => ImageFormat::Qcow2,
            "raw" => ImageFormat::Raw,
            _ => return None,
        };
        let size_text = field("size")?;
        if size_text.is_empty() || !size_text.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let size = size_text.parse().ok()?;
        if lines.next().is_some() {
            return None;
        }
        Some(Self {
            sha256,
            url,
            format,
            size,
        })
    }
}

/// What the configuration says an image is: the fields a marker must
/// match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WantedImage {
    /// The configured digest.
    pub sha256: Sha256Digest,
    /// The configured URL.
    pub url: HttpUrl,
    /// The configured format.
    pub format: ImageFormat,
}

impl From<&Kvm2Image> for WantedImage {
    fn from(image: &Kvm2Image) -> Self {
        Self {
            sha256: image.sha256,
            url: image.url.clone(),
            format: image.format,
        }
    }
}

/// What to do with a cached base.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseState {
    /// Marker and base agree with the configuration: use the base.
    Ready(ImageMarker),
    /// Neither base nor marker: download.
    Absent,
    /// Leftovers of an interrupted download or publish: delete them (marker
    /// first), then download.
    Debris(DebrisReason),
}

/// Why the cache holds debris.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebrisReason {
    /// A base volume with no marker (the publish never finished).
    BaseWithoutMarker,
    /// A marker that does not parse.
    UnreadableMarker,
    /// A marker whose base is gone.
    MarkerWithoutBase,
}

impl fmt::Display for DebrisReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DebrisReason::BaseWithoutMarker => "base volume without a marker",
            DebrisReason::UnreadableMarker => "unreadable marker",
            DebrisReason::MarkerWithoutBase => "marker without a base volume",
        })
    }
}

/// Decides what to do with the base of image `key`, given whether the base
/// volume exists and the marker volume's contents (`None`: no marker).
///
/// # Errors
/// [`Error::ImageChanged`] (Permanent) when a valid marker records a
/// different digest, URL or format than `wanted`: the base may
/// back running overlays, so it is kept, and the operator must add a new
/// image key instead of editing this one.
pub fn judge(
    key: &Identifier,
    wanted: &WantedImage,
    base_exists: bool,
    marker: Option<&[u8]>,
) -> Result<BaseState, Error> {
    let marker = match (base_exists, marker) {
        (false, None) => return Ok(BaseState::Absent),
        (false, Some(_)) => return Ok(BaseState::Debris(DebrisReason::MarkerWithoutBase)),
        (true, None) => return Ok(BaseState::Debris(DebrisReason::BaseWithoutMarker)),
        (true, Some(bytes)) => match ImageMarker::parse(bytes) {
            Some(m) => m,
            None => return Ok(BaseState::Debris(DebrisReason::UnreadableMarker)),
        },
    };
    let changed = |field: &'static str, recorded: String, configured: String| {
        Err(Error::ImageChanged {
            key: key.to_string(),
            field,
            recorded,
            configured,
        })
    };
    if marker.sha256 != wanted.sha256 {
        return changed(
            "sha256",
            marker.sha256.to_string(),
            wanted.sha256.to_string(),
        );
    }
    if marker.url != wanted.url {
        return changed("url", marker.url.to_string(), wanted.url.to_string());
    }
    if marker.format != wanted.format {
        return changed(
            "format",
            marker.format.to_string(),
            wanted.format.to_string(),
        );
    }
    Ok(BaseState::Ready(marker))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SHA_A: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    const SHA_B: &str = "0000000000000000000000000000000000000000000000000000000000000001";

    fn wanted() -> WantedImage {
        WantedImage {
            sha256: Sha256Digest::parse(SHA_A).unwrap(),
            url: HttpUrl::parse("https://images.example/debian-13.qcow2").unwrap(),
            format: ImageFormat::Qcow2,
        }
    }

    fn marker() -> ImageMarker {
        let w = wanted();
        ImageMarker {
            sha256: w.sha256,
            url: w.url,
            format: w.format,
            size: 433_000_000,
        }
    }

    fn key() -> Identifier {
        Identifier::parse("debian-13").unwrap()
    }

    #[test]
    fn render_is_the_documented_format() {
        assert_eq!(
            String::from_utf8(marker().render()).unwrap(),
            format!(
                "kvm2-base-marker 1\nsha256 {SHA_A}\nurl https://images.example/debian-13.qcow2\nformat qcow2\nsize 433000000\n"
            )
        );
        assert_eq!(ImageMarker::parse(&marker().render()), Some(marker()));
    }

    #[test]
    fn parse_rejects_anything_else() {
        let good = String::from_utf8(marker().render()).unwrap();
        for bad in [
            String::new(),
            good.trim_end().to_owned(),
            good.replace("marker 1", "marker 2"),
            good.replace("sha256 ", "sha256  "),
            good.replace("format qcow2", "format vmdk"),
            good.replace("size 433000000", "size -1"),
            good.replace("size 433000000", "size +1"),
            good.replace("size 433000000", "size 99999999999999999999999"),
            good.replace("https://", "ftp://"),
            format!("{good}extra\n"),
            good.replace('\n', "\r\n"),
            "x".repeat(MAX_MARKER_LEN + 1),
        ] {
            assert_eq!(ImageMarker::parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(ImageMarker::parse(&[0xff, 0xfe]), None);
    }

    #[test]
    fn decision_table() {
        let m = marker().render();
        let k = key();
        let w = wanted();
        assert_eq!(judge(&k, &w, false, None).unwrap(), BaseState::Absent);
        assert_eq!(
            judge(&k, &w, false, Some(&m)).unwrap(),
            BaseState::Debris(DebrisReason::MarkerWithoutBase)
        );
        assert_eq!(
            judge(&k, &w, true, None).unwrap(),
            BaseState::Debris(DebrisReason::BaseWithoutMarker)
        );
        assert_eq!(
            judge(&k, &w, true, Some(b"garbage")).unwrap(),
            BaseState::Debris(DebrisReason::UnreadableMarker)
        );
        assert_eq!(
            judge(&k, &w, true, Some(&m)).unwrap(),
            BaseState::Ready(marker())
        );
    }

    #[test]
    fn an_edited_digest_url_or_format_is_permanent_and_names_the_fix() {
        let m = marker().render();
        let mut edited = Vec::new();
        let mut w = wanted();
        w.sha256 = Sha256Digest::parse(SHA_B).unwrap();
        edited.push(("sha256", w));
        let mut w = wanted();
        w.url = HttpUrl::parse("https://mirror.example/debian-13.qcow2").unwrap();
        edited.push(("url", w));
        let mut w = wanted();
        w.format = ImageFormat::Raw;
        edited.push(("format", w));
        for (field, w) in edited {
            let err = judge(&key(), &w, true, Some(&m)).unwrap_err();
            assert!(
                matches!(&err, Error::ImageChanged { field: f, .. } if *f == field),
                "{err:?}"
            );
            assert!(err.is_permanent());
            let text = err.to_string();
            assert!(
                text.contains("debian-13") && text.contains("new image key"),
                "{text}"
            );
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = ImageMarker::parse(&bytes);
        }

        #[test]
        fn round_trip(size: u64, digest: [u8; 32], path in "[a-z0-9/]{0,40}") {
            let m = ImageMarker {
                sha256: Sha256Digest::from_bytes(digest),
                url: HttpUrl::parse(&format!("http://h.example/{path}")).unwrap(),
                format: ImageFormat::Raw,
                size,
            };
            prop_assert_eq!(ImageMarker::parse(&m.render()), Some(m));
        }
    }
}

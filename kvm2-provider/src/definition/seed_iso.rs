//! The cloud-init NoCloud seed: an ISO 9660 image labelled `cidata` holding
//! `meta-data`, `user-data` and `vendor-data`, built in memory.
//!
//! [`build`] is a pure function: the same [`SeedSpec`] gives the same bytes
//! (the image is dated with the spec's timestamp, never the clock). The
//! image carries Joliet and Rock Ridge trees so the file names survive
//! intact. Its size is planned before anything is written; over the limit is
//! [`Error::SeedTooLarge`].
//!
//! User data is a secret: it goes into the image and nowhere else — not into
//! errors, logs or `Debug` output.

use hadris_fs::{Content, DateTime, Node, Tree};
use hadris_iso::{IsoId, IsoOptions};
use provider_api::{Identifier, SecretString};

use crate::Error;
use crate::timestamp::Timestamp;

/// The volume label cloud-init's NoCloud source looks for.
pub const VOLUME_ID: &str = "cidata";

/// Default [`SeedSpec::size_limit`]: 1 MiB. cloud-init user data is small;
/// big payloads belong in a download the guest makes itself.
pub const DEFAULT_SIZE_LIMIT: u64 = 1 << 20;

/// Everything in a seed.
///
/// `Debug` shows the user data's length only.
#[derive(Debug, Clone)]
pub struct SeedSpec<'a> {
    /// `instance-id` in meta-data: a new id makes cloud-init run again, so it
    /// is the instance name, stable for the VM's life.
    pub instance_id: &'a Identifier,
    /// `local-hostname` in meta-data.
    pub hostname: &'a Identifier,
    /// The request's user data; `None` writes an empty `user-data`.
    pub user_data: Option<&'a SecretString>,
    /// The provider's vendor data (see [`vendor_data`](super::vendor_data)).
    pub vendor_data: &'a str,
    /// Date recorded in the image (creation time of the instance).
    pub time: Timestamp,
    /// Largest image allowed, in bytes.
    pub size_limit: u64,
}

/// Builds the seed image.
///
/// # Errors
/// [`Error::SeedTooLarge`] when the image would exceed `spec.size_limit`
/// (checked before building); [`Error::SeedIso`] if the ISO writer fails.
pub fn build(spec: &SeedSpec<'_>) -> Result<Vec<u8>, Error> {
    let user_data = spec.user_data.map_or("", SecretString::expose_secret);
    // Cheap early refusal before any copying: the files alone are too big.
    let payload = (user_data.len() + spec.vendor_data.len()) as u64;
    if payload > spec.size_limit {
        return Err(Error::SeedTooLarge {
            size: payload,
            limit: spec.size_limit,
        });
    }
    let meta_data = format!(
        "instance-id: {}\nlocal-hostname: {}\n",
        spec.instance_id, spec.hostname
    );

    let mut tree = Tree::new();
    for (name, bytes) in [
        ("meta-data", meta_data.into_bytes()),
        ("user-data", user_data.as_bytes().to_vec()),
        ("vendor-data", spec.vendor_data.as_bytes().to_vec()),
    ] {
        tree.insert(name, Node::file(Content::bytes(bytes)))
            .map_err(|e| iso_error(&e))?;
    }

    let time = i64::try_from(spec.time.unix_seconds())
        .ok()
        .and_then(|s| DateTime::from_unix_seconds(s).ok())
        .ok_or_else(|| Error::SeedIso {
            reason: "timestamp out of range".to_owned(),
        })?;
    let options = IsoOptions::default()
        .with_id(IsoId::Volume, VOLUME_ID)
        .with_id(IsoId::Application, "KVM2-PROVIDER")
        .with_joliet()
        .with_rock_ridge()
        .with_time(time);

    let size = hadris_iso::plan(&tree, &options)
        .map_err(|e| iso_error(&e))?
        .size();
    if size > spec.size_limit {
        return Err(Error::SeedTooLarge {
            size,
            limit: spec.size_limit,
        });
    }
    let capacity = usize::try_from(size).map_err(|_| Error::SeedTooLarge {
        size,
        limit: spec.size_limit,
    })?;
    let mut image: Vec<u8> = Vec::with_capacity(capacity);
    hadris_iso::sync::write(&mut image, &tree, &options).map_err(|e| iso_error(&e))?;
    Ok(image)
}

/// The writer's errors name files, never contents.
fn iso_error(e: &dyn std::fmt::Display) -> Error {
    Error::SeedIso {
        reason: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Identifier {
        Identifier::parse(s).unwrap()
    }

    #[test]
    fn same_spec_same_bytes() {
        let (name, secret) = (
            id("ep-0123456789abcdef"),
            SecretString::new("#cloud-config\n"),
        );
        let spec = SeedSpec {
            instance_id: &name,
            hostname: &name,
            user_data: Some(&secret),
            vendor_data: "#cloud-config\n",
            time: Timestamp::from_unix_seconds(1_796_202_916).unwrap(),
            size_limit: DEFAULT_SIZE_LIMIT,
        };
        let a = build(&spec).unwrap();
        let b = build(&spec).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.len() % 2048, 0);
        // A different time gives a different image (the time is recorded).
        let later = SeedSpec {
            time: Timestamp::from_unix_seconds(1_796_202_917).unwrap(),
            ..spec.clone()
        };
        assert_ne!(build(&later).unwrap(), a);
    }

    #[test]
    fn over_the_limit_is_a_clear_error_without_the_secret() {
        let name = id("ep-1");
        let secret = SecretString::new(format!("#cloud-config\n# SECRET-{}", "x".repeat(4096)));
        let spec = SeedSpec {
            instance_id: &name,
            hostname: &name,
            user_data: Some(&secret),
            vendor_data: "",
            time: Timestamp::from_unix_seconds(0).unwrap(),
            size_limit: 1024,
        };
        let err = build(&spec).unwrap_err();
        assert!(
            matches!(err, Error::SeedTooLarge { limit: 1024, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains("SECRET"));
        assert!(!format!("{err:?}").contains("SECRET"));
        assert!(!format!("{spec:?}").contains("SECRET"));

        // Files that fit but an image that does not (ISO overhead).
        let small = SecretString::new("x".repeat(1000));
        let spec = SeedSpec {
            user_data: Some(&small),
            size_limit: 20_000,
            ..spec
        };
        match build(&spec) {
            Err(Error::SeedTooLarge { size, limit }) => {
                assert!(size > limit, "{size} <= {limit}");
            }
            other => panic!("expected SeedTooLarge, got {other:?}"),
        }
    }
}

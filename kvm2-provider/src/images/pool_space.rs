//! The pool free-space pre-check made before a base image is uploaded.
//!
//! A pool that cannot hold the image is not an error of the request: it is
//! a lack of capacity now, which the reconciler answers by waiting long
//! (QuotaExceeded), not by retrying at once or giving up.

use provider_api::{Error as ApiError, Identifier};

/// Space kept free in a pool beyond the image itself: 1 GiB, so overlays
/// and seeds of running VMs can still grow.
pub const DEFAULT_HEADROOM: u64 = 1 << 30;

/// Checks that `pool` on `host`, with `available` bytes free, can take
/// `needed` bytes (what a fill writes: the download — its declared length,
/// or the size cap when the server declared none — streamed once, into the
/// base volume itself) plus `headroom`.
///
/// # Errors
/// QuotaExceeded naming the pool, host and both sizes.
pub fn check_pool_space(
    host: &Identifier,
    pool: &Identifier,
    available: u64,
    needed: u64,
    headroom: u64,
) -> Result<(), ApiError> {
    if needed
        .checked_add(headroom)
        .is_some_and(|required| available >= required)
    {
        return Ok(());
    }
    Err(ApiError::quota_exceeded(format!(
        "pool {pool} on host {host} has {} free; the image needs {} (written once, into the base volume) plus {} headroom",
        mib(available),
        mib(needed),
        mib(headroom)
    )))
}

fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes / (1 << 20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::ErrorClass;

    #[test]
    fn enough_space_passes_and_too_little_is_quota_exceeded() {
        let (h, p) = (
            Identifier::parse("host1").unwrap(),
            Identifier::parse("default").unwrap(),
        );
        assert!(check_pool_space(&h, &p, 3 << 30, 2 << 30, 1 << 30).is_ok());
        let err = check_pool_space(&h, &p, (3 << 30) - 1, 2 << 30, 1 << 30).unwrap_err();
        assert_eq!(err.class(), ErrorClass::QuotaExceeded);
        assert_eq!(
            err.to_string(),
            "pool default on host host1 has 3071 MiB free; the image needs 2048 MiB (written once, into the base volume) plus 1024 MiB headroom"
        );
        // No overflow at the top of the range.
        assert!(check_pool_space(&h, &p, u64::MAX, u64::MAX, 1).is_err());
    }
}

//! Test data: deterministic bytes that do not compress (image bodies,
//! stream payloads).

/// `len` pseudo-random bytes (xorshift64), the same for the same `seed`.
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_bytes_other_seed_other_bytes() {
        assert_eq!(pseudo_random(64, 7), pseudo_random(64, 7));
        assert_ne!(pseudo_random(64, 7), pseudo_random(64, 8));
        let distinct = pseudo_random(4096, 1)
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        assert!(distinct > 200, "{distinct}");
    }
}

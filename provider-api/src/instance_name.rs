//! [`name_from_uid`]: the stable instance name derived from the owner's UID.

use sha2::{Digest, Sha256};

use crate::ident::{Identifier, OwnerUid};

/// The prefix of every name [`name_from_uid`] returns ("egress proxy").
pub const INSTANCE_NAME_PREFIX: &str = "ep-";

/// Number of hex digits of the digest kept in the name (64 bits).
pub const INSTANCE_NAME_HEX_DIGITS: usize = 16;

/// The instance name for the object with `uid`: `"ep-"` followed by the first
/// 16 lowercase hex digits of `SHA-256(uid as UTF-8 bytes)`.
///
/// The algorithm is part of the contract and never changes: providers put
/// this name in domain and volume names and find existing instances by it,
/// so a change would orphan every running instance. The result is always a
/// valid [`Identifier`] (19 characters from `a-z 0-9 -`), whatever the UID.
/// With 64 bits of digest, the chance that any two of a million UIDs collide
/// is about 3 in 100 million; providers still refuse to adopt an instance
/// whose stored owner UID differs (the ownership mark), so a collision can
/// only fail a create, never hand one owner's VM to another.
///
/// ```
/// use provider_api::{name_from_uid, OwnerUid};
/// let uid = OwnerUid::parse("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab").unwrap();
/// let name = name_from_uid(&uid);
/// assert_eq!(name.as_str(), "ep-e7749fc11676e12e");
/// ```
pub fn name_from_uid(uid: &OwnerUid) -> Identifier {
    let digest = Sha256::digest(uid.as_str().as_bytes());
    let hex = hex::encode(digest);
    let name = format!(
        "{INSTANCE_NAME_PREFIX}{}",
        hex.get(..INSTANCE_NAME_HEX_DIGITS).unwrap_or(&hex)
    );
    // "ep-" + 16 lowercase hex digits always satisfies the identifier rule
    // (19 chars, alphanumeric ends, alphabet a-z 0-9 -); checked in debug
    // builds and by `name_is_always_an_identifier`.
    Identifier::new_trusted(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn uid(s: &str) -> OwnerUid {
        OwnerUid::parse(s).unwrap()
    }

    #[test]
    fn known_vector_is_stable() {
        // Pinned: changing this breaks every running instance's name.
        let n = name_from_uid(&uid("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab"));
        assert_eq!(n.as_str(), "ep-e7749fc11676e12e");
        let n = name_from_uid(&uid("a"));
        // sha256("a") = ca978112ca1bbdca...
        assert_eq!(n.as_str(), "ep-ca978112ca1bbdca");
    }

    #[test]
    fn no_collisions_over_many_uids() {
        // 200k UUID-shaped UIDs: distinct names for distinct UIDs.
        let mut seen = HashSet::new();
        for i in 0u64..200_000 {
            let d = Sha256::digest(i.to_le_bytes());
            let h = hex::encode(d);
            let s = format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            );
            let name = name_from_uid(&uid(&s));
            assert!(seen.insert(name), "collision at {i}: {s}");
        }
        // Near-identical UIDs (one character apart) do not collide either.
        let mut seen = HashSet::new();
        for i in 0u32..50_000 {
            let s = format!("00000000-0000-0000-0000-{i:012}");
            assert!(seen.insert(name_from_uid(&uid(&s))));
        }
    }

    proptest! {
        #[test]
        fn name_is_always_an_identifier(s in "[a-zA-Z0-9][a-zA-Z0-9-]{0,62}[a-zA-Z0-9]") {
            let n = name_from_uid(&uid(&s));
            prop_assert!(Identifier::parse(n.as_str()).is_ok());
            prop_assert_eq!(n.as_str().len(), 19);
            prop_assert!(n.as_str().starts_with(INSTANCE_NAME_PREFIX));
            prop_assert_eq!(name_from_uid(&uid(&s)), n);
        }
    }
}

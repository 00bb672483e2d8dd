//! The ownership mark and tags of a Pod, as labels: what makes a Pod ours
//! (invariant 7's rule for Pods) and what `list_by_tag` selects on.
//!
//! - `egress-proxies.io/provider: <entry>` and
//!   `egress-proxies.io/owner-uid: <uid>` are the mark: a Pod is ours only
//!   with both, the first naming this entry;
//! - each tag `k: v` is the label `tag.egress-proxies.io/<k>: <v>` (tag
//!   keys are identifiers, so they are label names; a value longer than a
//!   label's 63 characters is refused, never cut).

use std::collections::BTreeMap;

use provider_api::{Identifier, OwnerUid, Tag, TagValue, Tags};

/// The label naming the provider entry.
pub const PROVIDER_LABEL: &str = "egress-proxies.io/provider";
/// The label holding the owner's UID.
pub const OWNER_LABEL: &str = "egress-proxies.io/owner-uid";
/// The prefix of a tag's label.
pub const TAG_PREFIX: &str = "tag.egress-proxies.io/";
/// The standard label saying who manages the Pod.
const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The longest label value Kubernetes takes.
const LABEL_VALUE_MAX: usize = 63;

/// Who a Pod (or Secret) belongs to, judged from its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// Marked by this entry, for this owner.
    Ours(OwnerUid),
    /// No mark, or a broken one: never adopted, modified or deleted.
    Unmarked,
    /// Marked by another entry (named).
    OtherEntry(String),
}

/// The labels of an instance for `owner` with `tags` (the ownership mark
/// and the managed tag included).
///
/// # Errors
/// The name of a value too long for a label (owner UID or tag value).
pub fn labels(
    entry: &Identifier,
    owner: &OwnerUid,
    tags: &Tags,
) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    out.insert(PROVIDER_LABEL.to_owned(), entry.to_string());
    if owner.as_str().len() > LABEL_VALUE_MAX {
        return Err("the owner UID is longer than a label's 63 characters".to_owned());
    }
    out.insert(OWNER_LABEL.to_owned(), owner.as_str().to_owned());
    out.insert(MANAGED_BY_LABEL.to_owned(), "egress-proxies".to_owned());
    let managed = Tag::managed();
    let all = tags
        .iter()
        .chain(std::iter::once((&managed.key, &managed.value)));
    for (key, value) in all {
        if value.as_str().len() > LABEL_VALUE_MAX {
            return Err(format!(
                "tag {key}'s value is longer than a label's 63 characters"
            ));
        }
        out.insert(format!("{TAG_PREFIX}{key}"), value.as_str().to_owned());
    }
    Ok(out)
}

/// Judges a Pod's labels against `entry`.
pub fn ownership(labels: Option<&BTreeMap<String, String>>, entry: &Identifier) -> Ownership {
    let Some(labels) = labels else {
        return Ownership::Unmarked;
    };
    match (labels.get(PROVIDER_LABEL), labels.get(OWNER_LABEL)) {
        (Some(p), Some(uid)) if p == entry.as_str() => match OwnerUid::parse(uid) {
            Ok(uid) => Ownership::Ours(uid),
            Err(_) => Ownership::Unmarked,
        },
        (Some(p), Some(_)) => Ownership::OtherEntry(p.clone()),
        _ => Ownership::Unmarked,
    }
}

/// The tags stored in a Pod's labels (labels that are not valid tags are
/// skipped).
pub fn tags(labels: Option<&BTreeMap<String, String>>) -> Tags {
    let mut out = Tags::new();
    for (k, v) in labels.into_iter().flatten() {
        let Some(key) = k.strip_prefix(TAG_PREFIX) else {
            continue;
        };
        if let (Ok(key), Ok(value)) = (Identifier::parse(key), TagValue::parse(v)) {
            out.insert(key, value);
        }
    }
    out
}

/// The label selector of `entry`'s instances carrying `tag`.
pub fn selector(entry: &Identifier, tag: &Tag) -> String {
    // Identifiers and tag values hold no `,`, `=` or `!`: the selector
    // cannot be widened by a value.
    format!(
        "{PROVIDER_LABEL}={entry},{OWNER_LABEL},{TAG_PREFIX}{}={}",
        tag.key,
        tag.value.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> Identifier {
        Identifier::parse(s).unwrap()
    }

    #[test]
    fn the_mark_round_trips_and_judges_ownership() {
        let owner = OwnerUid::parse("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab").unwrap();
        let mut t = Tags::new();
        t.insert(id("cluster"), TagValue::parse("c-1234").unwrap());
        let l = labels(&id("pods"), &owner, &t).unwrap();
        assert_eq!(
            ownership(Some(&l), &id("pods")),
            Ownership::Ours(owner.clone())
        );
        assert_eq!(
            ownership(Some(&l), &id("other")),
            Ownership::OtherEntry("pods".into())
        );
        let got = tags(Some(&l));
        assert_eq!(got.get(&id("cluster")).unwrap().as_str(), "c-1234");
        assert_eq!(
            got.get(&id("managed-by")).unwrap().as_str(),
            "egress-proxies"
        );
        // No mark, half a mark, a broken UID: never ours.
        assert_eq!(ownership(None, &id("pods")), Ownership::Unmarked);
        let mut half = l.clone();
        half.remove(OWNER_LABEL);
        assert_eq!(ownership(Some(&half), &id("pods")), Ownership::Unmarked);
        let mut broken = l;
        broken.insert(OWNER_LABEL.into(), "-bad-".into());
        assert_eq!(ownership(Some(&broken), &id("pods")), Ownership::Unmarked);
    }

    #[test]
    fn values_too_long_for_a_label_are_refused() {
        let owner = OwnerUid::parse(&"a".repeat(64)).unwrap();
        assert!(labels(&id("pods"), &owner, &Tags::new()).is_err());
        let owner = OwnerUid::parse("uid").unwrap();
        let mut t = Tags::new();
        t.insert(id("k"), TagValue::parse(&"v".repeat(64)).unwrap());
        assert!(
            labels(&id("pods"), &owner, &t)
                .unwrap_err()
                .contains("tag k")
        );
    }

    #[test]
    fn the_selector_names_entry_mark_and_tag() {
        let s = selector(&id("pods"), &Tag::managed());
        assert_eq!(
            s,
            "egress-proxies.io/provider=pods,egress-proxies.io/owner-uid,tag.egress-proxies.io/managed-by=egress-proxies"
        );
    }
}

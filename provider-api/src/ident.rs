//! Validated strings: every name that reaches a libvirt domain name, a volume
//! name, an XML attribute, a URL or a file name is one of these types, and
//! the only way to build one is to parse it ("parse, don't validate").
//!
//! | type | rule | example |
//! |---|---|---|
//! | [`Identifier`] | 1–63 of `a-z 0-9 -`, first and last a letter or digit (an RFC 1123 DNS label) | `kvm2-home` |
//! | [`ObjectName`] | 1–253 chars, dot-separated parts of `a-z 0-9 -`, each starting and ending with a letter or digit (Kubernetes' DNS-1123 subdomain: an object name; no 63-character limit per part) | `proxy-a.team` |
//! | [`OwnerUid`] | 1–64 of `a-z A-Z 0-9 -`, first and last a letter or digit (a Kubernetes UID) | `6f1c…-9e` |
//! | [`TagValue`] | 0–64 of `a-z A-Z 0-9 . _ -`, no `..`, first and last (if any) a letter or digit | `egress-proxies` |
//!
//! None of these alphabets holds an XML-special character (`< > & " '`),
//! whitespace, a control character, `/`, `\`, `%`, `:` or a NUL, and none of
//! their values can be `.`, `..` or contain `..`; property tests in this
//! module hold each rule to that.

use std::fmt;

/// A value that failed to parse as one of this crate's validated types.
///
/// `Display` reads as the rule that was broken, e.g. ``must be an identifier
/// (1 to 63 characters from a-z, 0-9 and '-', starting and ending with a
/// letter or digit)``; the rejected value is not echoed (callers that know
/// it is not secret add it themselves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    rule: &'static str,
}

impl ParseError {
    pub(crate) const fn new(rule: &'static str) -> Self {
        ParseError { rule }
    }

    /// The rule that was broken, as a phrase starting with "must".
    pub fn rule(&self) -> &'static str {
        self.rule
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rule)
    }
}

impl std::error::Error for ParseError {}

/// The rule text of [`Identifier`].
pub const IDENTIFIER_RULE: &str = "must be an identifier (1 to 63 characters from a-z, 0-9 and '-', \
     starting and ending with a letter or digit)";
/// The rule text of [`ObjectName`].
pub const OBJECT_NAME_RULE: &str = "must be a DNS subdomain name (1 to 253 characters from a-z, \
     0-9, '-' and '.', each dot-separated part starting and ending with a letter or digit)";
/// The rule text of [`OwnerUid`].
pub const OWNER_UID_RULE: &str = "must be a UID (1 to 64 characters from a-z, A-Z, 0-9 and '-', \
     starting and ending with a letter or digit)";
/// The rule text of [`TagValue`].
pub const TAG_VALUE_RULE: &str = "must be a tag value (0 to 64 characters from a-z, A-Z, 0-9, '.', \
     '_' and '-', starting and ending with a letter or digit, without '..')";

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= 63
                && is_lower_alnum(*first)
                && is_lower_alnum(*last)
                && b.iter().all(|c| is_lower_alnum(*c) || *c == b'-')
        }
        _ => false,
    }
}

/// Kubernetes' `IsDNS1123Subdomain`: at most 253 characters, dot-separated
/// parts of `a-z 0-9 -`, each starting and ending with a letter or digit.
/// Unlike a DNS name, a part may be longer than 63 characters (the API
/// server accepts a 253-character object name without a dot).
fn is_object_name(s: &str) -> bool {
    let part = |p: &str| {
        let b = p.as_bytes();
        b.first().is_some_and(|c| is_lower_alnum(*c))
            && b.last().is_some_and(|c| is_lower_alnum(*c))
            && b.iter().all(|c| is_lower_alnum(*c) || *c == b'-')
    };
    !s.is_empty() && s.len() <= 253 && s.split('.').all(part)
}

fn is_owner_uid(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            b.len() <= 64
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        }
        _ => false,
    }
}

fn is_tag_value(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (None, _) | (_, None) => true,
        (Some(first), Some(last)) => {
            b.len() <= 64
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && !s.contains("..")
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        }
    }
}

macro_rules! validated_string {
    ($(#[$meta:meta])* $name:ident, $check:path, $rule:path) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Parses `s`, returning the rule it breaks on failure.
            ///
            /// # Errors
            /// [`ParseError`](crate::ident::ParseError) naming the rule when `s` does not satisfy it.
            pub fn parse(s: &str) -> Result<Self, $crate::ident::ParseError> {
                if $check(s) {
                    Ok($name(s.to_owned()))
                } else {
                    Err($crate::ident::ParseError::new($rule))
                }
            }

            /// Wraps text this crate built and knows to be valid.
            #[allow(dead_code)] // not every type has a trusted builder
            pub(crate) fn new_trusted(s: String) -> Self {
                debug_assert!($check(&s), "{s:?}");
                $name(s)
            }

            /// The validated text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The rule every value of this type satisfies.
            pub const RULE: &'static str = $rule;
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::ident::ParseError;
            fn from_str(s: &str) -> Result<Self, $crate::ident::ParseError> {
                Self::parse(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = $crate::ident::ParseError;
            fn try_from(s: &str) -> Result<Self, $crate::ident::ParseError> {
                Self::parse(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::ident::ParseError;
            fn try_from(s: String) -> Result<Self, $crate::ident::ParseError> {
                if $check(&s) {
                    Ok($name(s))
                } else {
                    Err($crate::ident::ParseError::new($rule))
                }
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl ::std::fmt::Debug for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                ::std::fmt::Debug::fmt(&self.0, f)
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.0
            }
        }
    };
}

/// Also used by [`crate::config::values`] for its text types.
pub(crate) use validated_string;

validated_string!(
    /// A name that may reach a libvirt domain or volume name, an XML
    /// attribute, a URL path segment or a file name: 1 to 63 characters from
    /// `a-z`, `0-9` and `-`, starting and ending with a letter or digit
    /// (regex `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`, an RFC 1123 DNS label).
    ///
    /// Used for provider entry names, host names, pool names, image keys,
    /// machine type names, Kubernetes namespaces and instance names.
    ///
    /// ```
    /// use provider_api::Identifier;
    /// assert!(Identifier::parse("kvm2-home").is_ok());
    /// assert!(Identifier::parse("Kvm2").is_err());
    /// assert!(Identifier::parse("a/../b").is_err());
    /// ```
    Identifier,
    is_identifier,
    IDENTIFIER_RULE
);

validated_string!(
    /// A Kubernetes object name (RFC 1123 DNS subdomain): 1 to 253
    /// characters, [`Identifier`]s joined by `.`; it can never be `.`, `..` or
    /// contain `..`.
    ObjectName,
    is_object_name,
    OBJECT_NAME_RULE
);

validated_string!(
    /// The Kubernetes UID of the object that owns an instance: 1 to 64
    /// characters from `a-z`, `A-Z`, `0-9` and `-`, starting and ending with a
    /// letter or digit. The ownership mark a provider stores with each
    /// instance; [`name_from_uid`](crate::name_from_uid) derives the instance
    /// name from it.
    OwnerUid,
    is_owner_uid,
    OWNER_UID_RULE
);

validated_string!(
    /// The value of a [`Tags`](crate::Tags) entry: 0 to 64 characters from
    /// `a-z`, `A-Z`, `0-9`, `.`, `_` and `-`, starting and ending with a
    /// letter or digit, without `..`.
    TagValue,
    is_tag_value,
    TAG_VALUE_RULE
);

impl From<Identifier> for ObjectName {
    fn from(id: Identifier) -> Self {
        ObjectName(id.0)
    }
}

impl From<Identifier> for TagValue {
    fn from(id: Identifier) -> Self {
        TagValue(id.0)
    }
}

impl From<OwnerUid> for TagValue {
    fn from(uid: OwnerUid) -> Self {
        // Total: an OwnerUid (1-64 of a-z A-Z 0-9 '-', alphanumeric ends) is
        // always a TagValue (0-64 of a superset alphabet, same ends, and
        // '-' never forms '..'); `owner_uid_is_always_a_tag_value` checks it.
        TagValue(uid.0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Characters no validated value may contain.
    pub(crate) const FORBIDDEN: &[char] = &[
        '<', '>', '&', '"', '\'', '/', '\\', '%', ':', ' ', '\t', '\n', '\r', '\0', '?', '#', '*',
        '=', ';', '$', '`', '|', '~',
    ];

    pub(crate) fn assert_inert(s: &str) {
        for c in FORBIDDEN {
            assert!(!s.contains(*c), "{s:?} contains {c:?}");
        }
        assert!(!s.contains(".."), "{s:?} contains ..");
        assert!(s != ".", "{s:?}");
        assert!(s.chars().all(|c| c.is_ascii_graphic()), "{s:?}");
    }

    #[test]
    fn identifier_accepts_dns_labels() {
        for ok in [
            "a",
            "0",
            "kvm2-home",
            "a-b-c",
            &"a".repeat(63),
            "ep-0123456789abcdef",
        ] {
            assert!(Identifier::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn identifier_rejects_each_broken_rule() {
        let long = "a".repeat(64);
        for bad in [
            "", "-a", "a-", "A", "a_b", "a.b", "a b", "a/b", "..", ".", "é", &long, "a\0",
        ] {
            let err = Identifier::parse(bad).unwrap_err();
            assert_eq!(err.rule(), IDENTIFIER_RULE, "{bad:?}");
        }
    }

    #[test]
    fn object_name_rules() {
        assert!(ObjectName::parse("proxy-a").is_ok());
        assert!(ObjectName::parse("a.b.c").is_ok());
        // As Kubernetes: a part may be longer than a DNS label.
        assert!(ObjectName::parse(&"a".repeat(253)).is_ok());
        assert!(ObjectName::parse(&format!("{}.b", "a".repeat(100))).is_ok());
        for bad in [
            "",
            "a..b",
            ".a",
            "a.",
            "A",
            "a_b",
            "-a",
            "a-.b",
            &"a.".repeat(127),
            &"a".repeat(254),
        ] {
            assert_eq!(ObjectName::parse(bad).unwrap_err().rule(), OBJECT_NAME_RULE);
        }
    }

    #[test]
    fn owner_uid_rules() {
        assert!(OwnerUid::parse("6f1c2a3e-1b2c-4d5e-8f90-0123456789ab").is_ok());
        assert!(OwnerUid::parse("ABC").is_ok());
        for bad in ["", "-a", "a-", "a_b", "a b", "a/b", &"a".repeat(65)] {
            assert_eq!(OwnerUid::parse(bad).unwrap_err().rule(), OWNER_UID_RULE);
        }
    }

    #[test]
    fn tag_value_rules() {
        for ok in ["", "a", "egress-proxies", "v1.2_3", "A"] {
            assert!(TagValue::parse(ok).is_ok(), "{ok}");
        }
        for bad in [".", "..", "a..b", ".a", "a.", "a/b", "a b", &"a".repeat(65)] {
            assert_eq!(TagValue::parse(bad).unwrap_err().rule(), TAG_VALUE_RULE);
        }
    }

    #[test]
    fn try_from_string_matches_parse() {
        assert!(Identifier::try_from("ok".to_owned()).is_ok());
        assert!(Identifier::try_from("NO".to_owned()).is_err());
        assert_eq!("ok".parse::<Identifier>().unwrap().as_str(), "ok");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn no_identifier_is_injectable(s in ".{0,80}") {
            if let Ok(id) = Identifier::parse(&s) { assert_inert(id.as_str()); }
            if let Ok(v) = ObjectName::parse(&s) { assert_inert(v.as_str()); }
            if let Ok(v) = OwnerUid::parse(&s) { assert_inert(v.as_str()); }
            if let Ok(v) = TagValue::parse(&s) { assert_inert(v.as_str()); }
        }

        #[test]
        fn near_miss_identifiers_are_inert(s in "[a-z0-9./<>&\"' -]{0,70}") {
            if let Ok(id) = Identifier::parse(&s) { assert_inert(id.as_str()); }
            if let Ok(v) = ObjectName::parse(&s) { assert_inert(v.as_str()); }
            if let Ok(v) = TagValue::parse(&s) { assert_inert(v.as_str()); }
        }

        #[test]
        fn owner_uid_is_always_a_tag_value(s in "[a-zA-Z0-9-]{1,64}") {
            if let Ok(uid) = OwnerUid::parse(&s) {
                let tag = TagValue::from(uid.clone());
                prop_assert!(TagValue::parse(tag.as_str()).is_ok());
                prop_assert_eq!(tag.as_str(), uid.as_str());
            }
        }

        #[test]
        fn identifier_matches_its_regex(s in "[a-z0-9-]{0,70}") {
            let expect = !s.is_empty() && s.len() <= 63 && !s.starts_with('-') && !s.ends_with('-');
            prop_assert_eq!(Identifier::parse(&s).is_ok(), expect);
        }
    }
}

//! Who may read the discovery API and the metrics: the bearer token a
//! request carries, the questions the operator asks the API server about
//! its caller, and what the answers let the caller see.
//!
//! ```text
//!  Authorization: Bearer T ─▶ BearerToken::from_header ── absent, malformed ──▶ 401
//!          │ TokenReview (the operator; cached by the token's digest)
//!          ▼                                            not authenticated ──▶ 401
//!  /metrics  ─▶ Question::GetMetrics ─────────────── allowed ─▶ 200, else ──▶ 403
//!  /proxies  ─▶ Question::list_proxies(None) ─────── allowed ─▶ Scope::All
//!               else namespaces_to_ask(query, watch cache)
//!               ─▶ Question::list_proxies(Some(ns)) each
//!               ─▶ Scope::from_answers ──── none allowed ──▶ 403, else the namespaces
//!  /leases…  ─▶ Question::LeaseProxies(ns) ───────── allowed ─▶ the lease call, else ──▶ 403
//! ```
//!
//! The operator turns each [`Question`] into a SubjectAccessReview
//! (`list proxies.egress-proxies.io`, cluster-wide or in one namespace;
//! `lease proxies.egress-proxies.io` in one namespace; `get` on the
//! non-resource URL `/metrics`) and carries out what the answers
//! decide; this module is the pure part. A token is never printed: a
//! [`BearerToken`] has no `Display`, and its `Debug` is redacted.

use std::collections::BTreeSet;

/// The longest bearer token accepted (a ServiceAccount token is about
/// 1 KiB; the longest the API server's own OIDC tokens reach is well under
/// this).
pub const MAX_TOKEN_LEN: usize = 8 * 1024;

/// A bearer token from an `Authorization` header: 1 to [`MAX_TOKEN_LEN`]
/// visible ASCII characters.
///
/// It is a secret (invariant 9): `Debug` shows `BearerToken(<redacted>)`,
/// there is no `Display` or `Serialize`, and [`BearerToken::secret`] is the
/// one way to read it (to hand it to the API server).
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(String);

impl BearerToken {
    /// The token of an `Authorization` header value `Bearer <token>` (the
    /// scheme in any case, one or more spaces before the token); `None`
    /// for any other value: another scheme, no token, a token with a space
    /// or a non-ASCII or control character, or one longer than
    /// [`MAX_TOKEN_LEN`].
    pub fn from_header(value: &[u8]) -> Option<BearerToken> {
        const SCHEME: &[u8] = b"bearer ";
        let head = value.get(..SCHEME.len())?;
        if !head.eq_ignore_ascii_case(SCHEME) {
            return None;
        }
        let rest = value.get(SCHEME.len()..)?;
        let start = rest.iter().position(|b| *b != b' ')?;
        let token = rest.get(start..)?;
        let visible = token.iter().all(|b| (0x21..=0x7e).contains(b));
        if !visible || token.len() > MAX_TOKEN_LEN {
            return None;
        }
        // Visible ASCII is UTF-8.
        std::str::from_utf8(token)
            .ok()
            .map(|t| BearerToken(t.to_owned()))
    }

    /// The token itself, for the TokenReview that checks it. Never log it.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

/// A question about the caller the API server answers (a
/// SubjectAccessReview).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Question {
    /// May it `list` `proxies.egress-proxies.io` in this namespace
    /// (`None`: in every namespace, a cluster-wide grant)?
    ListProxies {
        /// The namespace, or `None` for cluster-wide.
        namespace: Option<String>,
    },
    /// May it `get` the non-resource URL `/metrics` (Prometheus' rule for
    /// scraping, as the API server's own `/metrics` asks)?
    GetMetrics,
    /// May it `lease` `proxies.egress-proxies.io` in this namespace (a verb
    /// of our own: reading discovery does not imply taking proxies)?
    LeaseProxies {
        /// The namespace.
        namespace: String,
    },
}

impl Question {
    /// May the caller list Proxies in `namespace` (`None`: everywhere)?
    pub fn list_proxies(namespace: Option<&str>) -> Question {
        Question::ListProxies {
            namespace: namespace.map(str::to_owned),
        }
    }
}

/// Which Proxies a caller of the discovery API sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (it may list Proxies cluster-wide).
    All,
    /// Only these namespaces (never empty).
    Namespaces(BTreeSet<String>),
}

impl Scope {
    /// The scope the answers give: [`Scope::All`] when the cluster-wide
    /// question was allowed, else the namespaces whose question was; `None`
    /// (403) when no answer allowed anything.
    pub fn from_answers(
        cluster_wide: bool,
        per_namespace: impl IntoIterator<Item = (String, bool)>,
    ) -> Option<Scope> {
        if cluster_wide {
            return Some(Scope::All);
        }
        let allowed: BTreeSet<String> = per_namespace
            .into_iter()
            .filter_map(|(ns, allowed)| allowed.then_some(ns))
            .collect();
        (!allowed.is_empty()).then_some(Scope::Namespaces(allowed))
    }

    /// Whether a Proxy in `namespace` is within the scope.
    pub fn admits(&self, namespace: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Namespaces(set) => set.contains(namespace),
        }
    }
}

/// The namespaces to ask about when the cluster-wide question was refused:
/// the one the query names, else each namespace that has a Proxy in the
/// watch cache (a namespace without Proxies would add nothing to the
/// answer, so a caller entitled only to such namespaces gets 403 without a
/// `namespace` parameter and an empty list with it).
pub fn namespaces_to_ask<'a>(
    query: Option<&str>,
    cached: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<String> {
    match query {
        Some(ns) => BTreeSet::from([ns.to_owned()]),
        None => cached.into_iter().map(str::to_owned).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_table() {
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_LEN));
        let too_long = format!("Bearer {}", "a".repeat(MAX_TOKEN_LEN + 1));
        for (header, token) in [
            ("Bearer abc.def-ghi_~+/=", Some("abc.def-ghi_~+/=")),
            ("bearer abc", Some("abc")),
            ("BEARER   abc", Some("abc")),
            (long.as_str(), Some(&long[7..])),
            (too_long.as_str(), None),
            ("Bearer", None),
            ("Bearer ", None),
            ("Bearer    ", None),
            ("Bearer a b", None),
            ("Bearer a\tb", None),
            ("Bearer é", None),
            ("Basic YWxhZGRpbjpvcGVuc2VzYW1l", None),
            ("Bearerabc", None),
            ("", None),
        ] {
            let parsed = BearerToken::from_header(header.as_bytes());
            assert_eq!(
                parsed.as_ref().map(BearerToken::secret),
                token,
                "{header:?}"
            );
        }
        assert_eq!(BearerToken::from_header(b"Bearer a\xffb"), None);
    }

    #[test]
    fn a_token_is_never_printed() {
        let t = BearerToken::from_header(b"Bearer s3cr3t").unwrap();
        let shown = format!("{t:?} {:?} {:#?}", Some(&t), [&t]);
        assert!(!shown.contains("s3cr3t"), "{shown}");
        assert!(shown.contains("<redacted>"));
    }

    #[test]
    fn scope_from_answers_table() {
        let set = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>();
        let answers = |pairs: &[(&str, bool)]| {
            pairs
                .iter()
                .map(|(n, a)| (n.to_string(), *a))
                .collect::<Vec<_>>()
        };
        for (cluster, per_ns, expected) in [
            (true, answers(&[("a", false)]), Some(Scope::All)),
            (true, answers(&[]), Some(Scope::All)),
            (false, answers(&[]), None),
            (false, answers(&[("a", false), ("b", false)]), None),
            (
                false,
                answers(&[("a", true), ("b", false)]),
                Some(Scope::Namespaces(set(&["a"]))),
            ),
            (
                false,
                answers(&[("b", true), ("a", true)]),
                Some(Scope::Namespaces(set(&["a", "b"]))),
            ),
        ] {
            assert_eq!(
                Scope::from_answers(cluster, per_ns.clone()),
                expected,
                "{cluster} {per_ns:?}"
            );
        }
    }

    #[test]
    fn scope_admits_its_namespaces_only() {
        let s = Scope::Namespaces(BTreeSet::from(["a".to_owned()]));
        assert!(s.admits("a"));
        assert!(!s.admits("b"));
        assert!(!s.admits(""));
        assert!(Scope::All.admits("b"));
    }

    #[test]
    fn the_query_namespace_alone_is_asked_about() {
        let cached = ["b", "a", "b", "c"];
        assert_eq!(
            namespaces_to_ask(Some("x"), cached),
            BTreeSet::from(["x".to_owned()])
        );
        let asked: Vec<String> = namespaces_to_ask(None, cached).into_iter().collect();
        assert_eq!(asked, ["a", "b", "c"]);
        assert!(namespaces_to_ask(None, []).is_empty());
    }
}

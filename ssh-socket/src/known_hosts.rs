//! Host key verification against an OpenSSH known_hosts file (pure: text in,
//! verdict out).
//!
//! Supported: plain host lists with `*`/`?` wildcards and `!` negations,
//! hashed `|1|salt|hash` names, `[host]:port` names for ports other than 22,
//! `@revoked` (a revoked key is refused even if another line trusts it) and
//! `@cert-authority` (a host certificate signed by a listed authority is
//! trusted: [`verify_certificate`]; a host trusted only through a CA line
//! that presents a plain key is refused with its own verdict, never treated
//! as merely unknown). Lines that do not parse are skipped, as OpenSSH does.

use russh::keys::ssh_key::Certificate;
use russh::keys::ssh_key::certificate::CertType;
use russh::keys::ssh_key::known_hosts::{HostPatterns, Marker};
use russh::keys::{Algorithm, HashAlg, PublicKey};

/// What the known_hosts file says about a server key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// A line for this host lists this key.
    Trusted,
    /// No line for this host lists a key of this algorithm.
    Unknown {
        /// How many lines list this host with keys of other algorithms.
        other_algorithms: usize,
    },
    /// A line for this host lists another key of the same algorithm.
    Changed {
        /// 1-based line number.
        line: usize,
    },
    /// An `@revoked` line for this host lists this key.
    Revoked {
        /// 1-based line number.
        line: usize,
    },
    /// Only `@cert-authority` lines name this host.
    CertAuthorityOnly {
        /// 1-based line number.
        line: usize,
    },
}

/// The name a host is listed under: `host` for port 22, `[host]:port`
/// otherwise (OpenSSH's convention).
pub(crate) fn host_entry(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_ascii_lowercase()
    } else {
        format!("[{}]:{port}", host.to_ascii_lowercase())
    }
}

/// The SHA-256 fingerprint of a key, as OpenSSH prints it.
pub(crate) fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

/// Checks `key` for `host_entry` against the contents of a known_hosts file.
pub(crate) fn verify(text: &str, host_entry: &str, key: &PublicKey) -> Verdict {
    let mut trusted = false;
    let mut changed = None;
    let mut other_algorithms = 0;
    let mut cert_authority = None;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let Some(entry) = parse_line(raw) else {
            continue;
        };
        if !entry.matches(host_entry) {
            continue;
        }
        let same_key = entry.key.key_data() == key.key_data();
        match entry.marker {
            Some(Marker::Revoked) => {
                if same_key {
                    return Verdict::Revoked { line };
                }
            }
            Some(Marker::CertAuthority) => {
                cert_authority.get_or_insert(line);
            }
            None => {
                if same_key {
                    trusted = true;
                } else if entry.key.algorithm() == key.algorithm() {
                    changed.get_or_insert(line);
                } else {
                    other_algorithms += 1;
                }
            }
        }
    }
    if trusted {
        Verdict::Trusted
    } else if let Some(line) = changed {
        Verdict::Changed { line }
    } else if let Some(line) = cert_authority {
        Verdict::CertAuthorityOnly { line }
    } else {
        Verdict::Unknown { other_algorithms }
    }
}

/// What the known_hosts file says about a host certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CertVerdict {
    /// Signed by an authority listed for this host, valid now, for this
    /// host name.
    Trusted,
    /// Refused, and why (for the error message; no key material).
    Refused(String),
}

/// Checks a host certificate for `host` (the name dialled, as its
/// principal must read) and `host_entry` (how known_hosts lists it)
/// against a known_hosts file's text, at `now` (seconds since 1970), as
/// OpenSSH does: a host certificate, signed by a key an `@cert-authority`
/// line lists for the host, neither that key nor the certificate's own key
/// `@revoked`, within its validity window, naming `host` among its
/// principals (a certificate naming none is refused), with no critical
/// option (none is defined for hosts).
pub(crate) fn verify_certificate(
    text: &str,
    host_entry: &str,
    host: &str,
    cert: &Certificate,
    now: u64,
) -> CertVerdict {
    let refused = |why: &str| CertVerdict::Refused(why.to_owned());
    let mut authorities = Vec::new();
    for entry in text.lines().filter_map(parse_line) {
        if !entry.matches(host_entry) {
            continue;
        }
        match entry.marker {
            Some(Marker::Revoked) => {
                if entry.key.key_data() == cert.signature_key() {
                    return refused("its signing authority's key is @revoked");
                }
                if entry.key.key_data() == cert.public_key() {
                    return refused("the host's key is @revoked");
                }
            }
            Some(Marker::CertAuthority) => {
                authorities.push(entry.key.fingerprint(HashAlg::Sha256));
            }
            None => {}
        }
    }
    if authorities.is_empty() {
        return refused("no @cert-authority line lists an authority for this host");
    }
    if cert.cert_type() != CertType::Host {
        return refused("it is a user certificate, not a host certificate");
    }
    let signer = cert.signature_key().fingerprint(HashAlg::Sha256);
    if !authorities.contains(&signer) {
        return refused("it is not signed by an authority known_hosts lists for this host");
    }
    if cert.validate_at(now, &authorities).is_err() {
        let window = if now < cert.valid_after() {
            "it is not valid yet"
        } else if now >= cert.valid_before() {
            "it has expired"
        } else {
            "its signature does not verify"
        };
        return refused(window);
    }
    let principals = cert.valid_principals();
    if !principals.iter().any(|p| p.eq_ignore_ascii_case(host)) {
        return CertVerdict::Refused(if principals.is_empty() {
            "it names no host (no principals)".to_owned()
        } else {
            format!("it is for {} only, not {host}", principals.join(", "))
        });
    }
    if !cert.critical_options().is_empty() {
        return refused("it carries critical options, which no host certificate may");
    }
    CertVerdict::Trusted
}

/// Whether an `@cert-authority` line names `host_entry`: the dial then asks
/// the server for its certificate first.
pub(crate) fn has_authority(text: &str, host_entry: &str) -> bool {
    text.lines()
        .filter_map(parse_line)
        .any(|e| e.marker == Some(Marker::CertAuthority) && e.matches(host_entry))
}

/// The host key algorithms to offer, most preferred first: `offered` in
/// its order, with the algorithms of the keys known_hosts lists for
/// `host_entry` moved to the front (OpenSSH's `order_hostkeyalgs`). A server
/// with several host keys then answers with one the file can check, instead
/// of one it does not list (a file made by `ssh-keyscan -t rsa`, or from
/// before the server gained an ed25519 key). A listed RSA key brings every
/// RSA signature algorithm forward; `@revoked` and `@cert-authority` lines
/// bring nothing.
pub(crate) fn preferred_algorithms(
    text: &str,
    host_entry: &str,
    offered: &[Algorithm],
) -> Vec<Algorithm> {
    let listed: Vec<Algorithm> = text
        .lines()
        .filter_map(parse_line)
        .filter(|e| e.marker.is_none() && e.matches(host_entry))
        .map(|e| e.key.algorithm())
        .collect();
    // `Algorithm::is_rsa` takes its receiver by value (and is not `Copy`).
    let is_rsa = |a: &Algorithm| matches!(a, Algorithm::Rsa { .. });
    let is_listed = |a: &Algorithm| listed.iter().any(|l| l == a || (is_rsa(l) && is_rsa(a)));
    let (mut first, rest): (Vec<Algorithm>, Vec<Algorithm>) =
        offered.iter().cloned().partition(is_listed);
    first.extend(rest);
    first
}

/// One parsed known_hosts line.
struct Entry {
    marker: Option<Marker>,
    hosts: HostPatterns,
    key: PublicKey,
}

/// Parses a line; `None` for comments, blank and malformed lines.
fn parse_line(raw: &str) -> Option<Entry> {
    let line = raw.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let mut fields = line.split_whitespace();
    let mut first = fields.next()?;
    let marker = if first.starts_with('@') {
        let marker = first.parse::<Marker>().ok()?;
        first = fields.next()?;
        Some(marker)
    } else {
        None
    };
    let hosts = first.parse::<HostPatterns>().ok()?;
    let algorithm = fields.next()?;
    let blob = fields.next()?;
    let key = PublicKey::from_openssh(&format!("{algorithm} {blob}")).ok()?;
    Some(Entry { marker, hosts, key })
}

impl Entry {
    fn matches(&self, host_entry: &str) -> bool {
        match &self.hosts {
            HostPatterns::HashedName { salt, hash } => {
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
                ring::hmac::verify(&key, host_entry.as_bytes(), hash).is_ok()
            }
            HostPatterns::Patterns(patterns) => {
                let mut positive = false;
                for pattern in patterns {
                    let pattern = pattern.to_ascii_lowercase();
                    if let Some(negated) = pattern.strip_prefix('!') {
                        if glob(negated.as_bytes(), host_entry.as_bytes()) {
                            return false;
                        }
                    } else if glob(pattern.as_bytes(), host_entry.as_bytes()) {
                        positive = true;
                    }
                }
                positive
            }
        }
    }
}

/// OpenSSH's wildcard match: `*` any run, `?` any one byte.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                backtrack = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || Some(&c) == text.get(t) => {
                p += 1;
                t += 1;
            }
            _ => match backtrack {
                Some((bp, bt)) => {
                    p = bp + 1;
                    t = bt + 1;
                    backtrack = Some((bp, bt + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .is_some_and(|rest| rest.iter().all(|&c| c == b'*'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED_A: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILeHf05okMDvP0ZCtboHAI5EEC31gAsmmQ0kGM/jTg1h";
    const ED_B: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAfTa9uyDQhg2PFzJIvDbyrgqg5Zzgexq+H743m2AKYJ";
    const ECDSA: &str = "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBClIzEhe/P5qakT6rBvgtkOTiviLqqHfryZ+x4utdAfamTUYOTJ0ACRoZyXd20ieGYFswzLKApNs1ZbTLAIo7X0=";

    fn key(text: &str) -> PublicKey {
        PublicKey::from_openssh(text).unwrap()
    }

    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQDRPbBvtHTxXtUURfOGeWhFk4JqFhkWmJOv60J9D+kbS7jOmz7tkrmuYEGpoH84Zll6tm6Ra/W0zxXkkt20BGYFs2poBa9EmvH/2Xu1TNxhdZV9sWB1ymm27qZbp1jf1q7ytaxaqDusHV3bXR3v3LDPP4nNc3FJxnh+xtkaYID9nw==";

    fn offered() -> Vec<Algorithm> {
        russh::Preferred::DEFAULT.key.to_vec()
    }

    fn names(algorithms: &[Algorithm]) -> Vec<String> {
        algorithms.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn listed_algorithms_are_offered_first() {
        let text = format!("other {ED_A}\nhost {ECDSA}\n");
        let order = preferred_algorithms(&text, "host", &offered());
        assert_eq!(order[0], key(ECDSA).algorithm());
        assert_eq!(order[1], Algorithm::Ed25519, "the rest keep their order");
        assert_eq!(order.len(), offered().len(), "nothing dropped");
    }

    #[test]
    fn a_listed_rsa_key_brings_every_rsa_signature_forward() {
        let text = format!("[host]:2222 {RSA}\n");
        let order = names(&preferred_algorithms(&text, "[host]:2222", &offered()));
        assert_eq!(
            &order[..3],
            ["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
            "{order:?}"
        );
        assert_eq!(order[3], "ssh-ed25519");
    }

    #[test]
    fn unlisted_hosts_and_marked_lines_change_nothing() {
        let text = format!("other {RSA}\n@revoked host {ECDSA}\n@cert-authority host {RSA}\n");
        assert_eq!(preferred_algorithms(&text, "host", &offered()), offered());
        assert_eq!(preferred_algorithms("", "host", &offered()), offered());
    }

    #[test]
    fn glob_matches_like_openssh() {
        assert!(glob(b"*.example.org", b"a.example.org"));
        assert!(glob(b"a?c", b"abc"));
        assert!(glob(b"*", b""));
        assert!(glob(b"[10.0.0.*]:2222", b"[10.0.0.7]:2222"));
        assert!(!glob(b"*.example.org", b"example.org"));
        assert!(!glob(b"abc", b"abcd"));
        assert!(glob(b"a*b*c", b"axxbyyc"));
    }

    #[test]
    fn host_entry_brackets_non_default_ports() {
        assert_eq!(host_entry("Host.Example", 22), "host.example");
        assert_eq!(host_entry("127.0.0.1", 2222), "[127.0.0.1]:2222");
    }

    #[test]
    fn plain_entry_with_port_is_trusted() {
        let text = format!("# comment\n\n[127.0.0.1]:2222 {ED_A} comment here\n");
        let v = verify(&text, "[127.0.0.1]:2222", &key(ED_A));
        assert_eq!(v, Verdict::Trusted);
        // The same name without the port does not match.
        let v = verify(&text, "127.0.0.1", &key(ED_A));
        assert_eq!(
            v,
            Verdict::Unknown {
                other_algorithms: 0
            }
        );
    }

    #[test]
    fn tabs_and_multiple_spaces_are_field_separators() {
        let (alg, blob) = ED_A.split_once(' ').unwrap();
        let text = format!("host1,host2\t{alg}   {blob}\n");
        assert_eq!(verify(&text, "host2", &key(ED_A)), Verdict::Trusted);
    }

    #[test]
    fn hashed_entry_matches() {
        let salt = b"0123456789abcdefghij";
        let hmac_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
        let tag = ring::hmac::sign(&hmac_key, b"[127.0.0.1]:2222");
        let hashed = HostPatterns::HashedName {
            salt: salt.to_vec(),
            hash: tag.as_ref().try_into().unwrap(),
        };
        let text = format!("{} {ED_A}\n", hashed.to_string());
        assert_eq!(
            verify(&text, "[127.0.0.1]:2222", &key(ED_A)),
            Verdict::Trusted
        );
        assert_eq!(
            verify(&text, "[127.0.0.1]:2223", &key(ED_A)),
            Verdict::Unknown {
                other_algorithms: 0
            }
        );
    }

    #[test]
    fn different_key_same_algorithm_is_changed_other_algorithm_is_unknown() {
        let text = format!("h1 {ECDSA}\nh1 {ED_B}\n");
        assert_eq!(
            verify(&text, "h1", &key(ED_A)),
            Verdict::Changed { line: 2 }
        );
        let text = format!("h1 {ECDSA}\n");
        assert_eq!(
            verify(&text, "h1", &key(ED_A)),
            Verdict::Unknown {
                other_algorithms: 1
            }
        );
    }

    #[test]
    fn revoked_key_is_refused_even_if_also_trusted() {
        let text = format!("h1 {ED_A}\n@revoked * {ED_A}\n");
        assert_eq!(
            verify(&text, "h1", &key(ED_A)),
            Verdict::Revoked { line: 2 }
        );
        // A revoked line for another key does not affect this one.
        let text = format!("h1 {ED_A}\n@revoked * {ED_B}\n");
        assert_eq!(verify(&text, "h1", &key(ED_A)), Verdict::Trusted);
    }

    #[test]
    fn cert_authority_only_is_its_own_verdict() {
        let text = format!("@cert-authority *.example.org {ED_B}\n");
        assert_eq!(
            verify(&text, "a.example.org", &key(ED_A)),
            Verdict::CertAuthorityOnly { line: 1 }
        );
        // A plain entry next to the CA line still works.
        let text = format!("@cert-authority *.example.org {ED_B}\na.example.org {ED_A}\n");
        assert_eq!(verify(&text, "a.example.org", &key(ED_A)), Verdict::Trusted);
    }

    #[test]
    fn negation_excludes_a_host() {
        let text = format!("*.example.org,!bad.example.org {ED_A}\n");
        assert_eq!(
            verify(&text, "good.example.org", &key(ED_A)),
            Verdict::Trusted
        );
        assert_eq!(
            verify(&text, "bad.example.org", &key(ED_A)),
            Verdict::Unknown {
                other_algorithms: 0
            }
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_files_and_names_never_panic(
            text in "(@?[a-z*?!\\[\\]:|0-9.,]{0,12}( ssh-ed25519)? ?[A-Za-z0-9+/=|]{0,80}\n){0,6}",
            host in "[a-z0-9.\\[\\]:*?]{0,20}",
        ) {
            let _ = verify(&text, &host, &key(ED_A));
        }

        #[test]
        fn glob_never_panics(pattern in "[a*?]{0,12}", text in "[ab]{0,12}") {
            let _ = glob(pattern.as_bytes(), text.as_bytes());
        }
    }

    #[test]
    fn malformed_lines_are_skipped() {
        let text = format!("garbage\n@bogus h1 {ED_A}\nh1 ssh-ed25519 !!!\nh1 {ED_A}\n");
        assert_eq!(verify(&text, "h1", &key(ED_A)), Verdict::Trusted);
    }
}

//! OpenSSH's `Host` patterns: `*` and `?` wildcards, `!` negation, host
//! names compared without regard to case.

/// Whether `text` matches wildcard `pattern` (`*` any run, `?` any one
/// character), comparing ASCII case-insensitively when `fold` is set.
pub(crate) fn wildcard(pattern: &str, text: &str, fold: bool) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let eq = |a: char, b: char| {
        if fold {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    // Iterative match with one backtrack point (the last `*`): linear in
    // practice, never recursive.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || eq(c, t[ti]) => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Whether `host` matches a `Host` line's patterns: no negated pattern
/// matches it and at least one plain pattern does.
pub(crate) fn host_matches(patterns: &[String], host: &str) -> bool {
    let mut matched = false;
    for pattern in patterns {
        match pattern.strip_prefix('!') {
            Some(negated) if wildcard(negated, host, true) => return false,
            Some(_) => {}
            None => matched |= wildcard(pattern, host, true),
        }
    }
    matched
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_and_negation_as_openssh() {
        assert!(wildcard("*", "", true));
        assert!(wildcard("web-*", "WEB-1", true));
        assert!(!wildcard("web-*", "WEB-1", false));
        assert!(wildcard("h?st", "host", true));
        assert!(!wildcard("h?st", "hst", true));
        assert!(wildcard("*.example.*", "a.b.example.org", true));
        assert!(!wildcard("*.example", "example", true));
        assert!(wildcard("a*b*c", "axxbyyc", true));
        assert!(!wildcard("a*b*c", "axxbyy", true));
        let p = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(host_matches(&p(&["*", "!bastion"]), "hv1"));
        assert!(!host_matches(&p(&["*", "!bastion"]), "bastion"));
        // A negation alone matches nothing.
        assert!(!host_matches(&p(&["!bastion"]), "hv1"));
    }
}

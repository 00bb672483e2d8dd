//! The proxy's Squid configuration, one set of rules for every provider
//! that runs Squid (kvm2 writes it into each VM's vendor data, kubernetes
//! into each Pod's Secret): a non-caching forward proxy that allows
//! `CONNECT` to port 443 only, from the entry's `allowed_clients` only,
//! never to an internal destination ([`INTERNAL_DESTINATIONS`]) unless
//! `allowed_destinations` names it, optionally behind basic
//! authentication, and logging every request.
//!
//! Pure: [`squid_conf`] renders lines from typed settings (ports, parsed
//! address ranges), so nothing a user configures can change the file's
//! structure; [`PasswordLine`] hashes the credentials with a salt the
//! caller draws.

use crate::config::ProxySettings;
use crate::proxy_credentials::ProxyCredentials;

/// Destinations no CONNECT may reach unless the entry's
/// `proxy.allowed_destinations` lets it: "this network", RFC 1918,
/// shared address space (CGNAT), loopback, link-local (cloud metadata at
/// 169.254.169.254 among them), IPv6 loopback, unique-local and link-local.
/// Squid's `dst` matches the address a name resolves to, so a public name
/// pointing inside is refused too.
pub const INTERNAL_DESTINATIONS: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "::1",
    "fc00::/7",
    "fe80::/10",
];

/// Where Squid keeps its logs and state: what differs between a VM and a
/// container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout<'a> {
    /// A VM: the access log in `path` through Squid's log daemon, rotated
    /// keeping `keep` old files; Debian's defaults for the rest.
    Files {
        /// The access log.
        path: &'a str,
        /// Rotated files kept.
        keep: u32,
    },
    /// A container running Squid in the foreground as an unprivileged
    /// user: both logs on the standard streams (what `kubectl logs`
    /// shows), no pid file, no ICMP pinger (it needs privileges), a short
    /// shutdown so a deleted Pod ends within its grace period.
    Container,
}

/// Why settings cannot make a usable proxy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {rule}")]
pub struct Unusable {
    /// The setting.
    pub what: &'static str,
    /// The rule it breaks.
    pub rule: &'static str,
}

/// squid.conf's lines for `settings`; with `password_file`, every request
/// must also authenticate (basic, against that file of [`PasswordLine`]s):
/// 407 without or with wrong credentials.
///
/// # Errors
/// [`Unusable`] when the port is 0 or no client range is given (a proxy
/// nobody may use is a configuration mistake).
pub fn squid_conf(
    settings: &ProxySettings,
    password_file: Option<&str>,
    layout: Layout<'_>,
) -> Result<Vec<String>, Unusable> {
    if settings.port == 0 {
        return Err(Unusable {
            what: "proxy port",
            rule: "must be 1 to 65535",
        });
    }
    if settings.allowed_clients.is_empty() {
        return Err(Unusable {
            what: "proxy client ranges",
            rule: "at least one range must be allowed",
        });
    }
    let join = |list: &[crate::config::Cidr]| {
        list.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut squid = vec![
        "# Written by egress-proxies: CONNECT to 443 only, never inside,".to_owned(),
        "# no caching.".to_owned(),
        format!("http_port {}", settings.port),
    ];
    if let Some(file) = password_file {
        squid.extend([
            format!("auth_param basic program /usr/lib/squid/basic_ncsa_auth {file}"),
            "auth_param basic realm egress-proxy".to_owned(),
            "acl authenticated proxy_auth REQUIRED".to_owned(),
        ]);
    }
    squid.extend([
        format!("acl clients src {}", join(&settings.allowed_clients)),
        "acl ssl_ports port 443".to_owned(),
        "acl CONNECT method CONNECT".to_owned(),
        format!("acl internal dst {}", INTERNAL_DESTINATIONS.join(" ")),
        "http_access deny !CONNECT".to_owned(),
        "http_access deny CONNECT !ssl_ports".to_owned(),
        "http_access deny !clients".to_owned(),
    ]);
    if password_file.is_some() {
        squid.push("http_access deny !authenticated".to_owned());
    }
    if !settings.allowed_destinations.is_empty() {
        squid.push(format!(
            "acl allowed_destinations dst {}",
            join(&settings.allowed_destinations)
        ));
        squid.push("http_access allow allowed_destinations".to_owned());
    }
    squid.extend([
        "http_access deny internal".to_owned(),
        "http_access allow clients".to_owned(),
        "http_access deny all".to_owned(),
        "cache deny all".to_owned(),
    ]);
    match layout {
        Layout::Files { path, keep } => squid.extend([
            format!("access_log daemon:{path} squid"),
            format!("logfile_rotate {keep}"),
        ]),
        Layout::Container => squid.extend([
            "access_log stdio:/dev/stdout squid".to_owned(),
            "cache_log /dev/stderr".to_owned(),
            "pid_filename none".to_owned(),
            "pinger_enable off".to_owned(),
            "visible_hostname egress-proxy".to_owned(),
            "shutdown_lifetime 2 seconds".to_owned(),
        ]),
    }
    Ok(squid)
}

/// A line of Squid's password file: `user:$6$rounds=5000$SALT$HASH`
/// (SHA-512-crypt, which Debian's libcrypt verifies; the 12 salt bytes
/// make the 16 salt characters glibc reads — a longer salt is cut there and
/// the hash would never match). Its `Debug` shows the user only.
#[derive(Clone)]
pub struct PasswordLine(String);

/// The password could not be hashed (the hasher's error names no input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("proxy credentials: cannot hash the password")]
pub struct HashError;

impl PasswordLine {
    /// The line for `credentials`, hashed with `salt` (random bytes the
    /// caller draws: this module does no IO).
    ///
    /// # Errors
    /// [`HashError`] if the hasher fails.
    pub fn new(credentials: &ProxyCredentials, salt: [u8; 12]) -> Result<Self, HashError> {
        use sha_crypt::{PasswordHasher, ShaCrypt};
        let hash = ShaCrypt::default()
            .hash_password_with_salt(credentials.password().expose_secret().as_bytes(), &salt)
            .map_err(|_| HashError)?;
        Ok(Self(format!("{}:{}", credentials.user(), hash.as_str())))
    }

    /// The line as written to the file.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for PasswordLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user = self.0.split(':').next().unwrap_or_default();
        write!(f, "PasswordLine({user}:<hash>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Cidr;

    fn settings() -> ProxySettings {
        ProxySettings::new(
            3128,
            vec![
                Cidr::parse("10.0.0.0/8").unwrap(),
                Cidr::parse("fd00::/8").unwrap(),
            ],
        )
    }

    const FILES: Layout<'static> = Layout::Files {
        path: "/var/log/squid/access.log",
        keep: 7,
    };

    #[test]
    fn internal_destinations_are_refused_before_clients_are_allowed() {
        for layout in [FILES, Layout::Container] {
            let rules = squid_conf(&settings(), None, layout).unwrap();
            assert!(rules.contains(&"http_port 3128".to_owned()));
            assert!(rules.contains(&"acl clients src 10.0.0.0/8 fd00::/8".to_owned()));
            assert!(rules.contains(&"http_access deny CONNECT !ssl_ports".to_owned()));
            let at = |l: &str| rules.iter().position(|r| r == l);
            let deny_internal = at("http_access deny internal");
            assert!(
                deny_internal.is_some() && deny_internal < at("http_access allow clients"),
                "{rules:#?}"
            );
            assert!(rules.contains(&"acl internal dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.168.0.0/16 ::1 fc00::/7 fe80::/10".to_owned()));
            assert!(!rules.iter().any(|l| l.contains("allowed_destinations")));
        }
    }

    #[test]
    fn the_layout_decides_logs_and_state_only() {
        let files = squid_conf(&settings(), None, FILES).unwrap();
        let container = squid_conf(&settings(), None, Layout::Container).unwrap();
        assert!(files.contains(&"access_log daemon:/var/log/squid/access.log squid".to_owned()));
        assert!(files.contains(&"logfile_rotate 7".to_owned()));
        assert!(container.contains(&"access_log stdio:/dev/stdout squid".to_owned()));
        assert!(container.contains(&"pid_filename none".to_owned()));
        // The access rules are the same lines in the same order.
        let rules = |v: &[String]| -> Vec<String> {
            v.iter()
                .filter(|l| l.starts_with("acl") || l.starts_with("http_access"))
                .cloned()
                .collect()
        };
        assert_eq!(rules(&files), rules(&container));
    }

    #[test]
    fn authentication_is_required_before_anything_is_allowed() {
        let rules = squid_conf(&settings(), Some("/etc/squid/passwd"), Layout::Container).unwrap();
        let at = |l: &str| rules.iter().position(|r| r == l);
        assert!(
            at("auth_param basic program /usr/lib/squid/basic_ncsa_auth /etc/squid/passwd")
                .is_some()
        );
        let deny = at("http_access deny !authenticated");
        assert!(deny.is_some() && deny < at("http_access allow clients"));
    }

    #[test]
    fn allowed_destinations_come_before_the_internal_deny() {
        let s = settings().with_allowed_destinations(vec![Cidr::parse("10.213.7.9/32").unwrap()]);
        let rules = squid_conf(&s, None, FILES).unwrap();
        let at = |l: &str| rules.iter().position(|r| r == l);
        let acl = at("acl allowed_destinations dst 10.213.7.9/32");
        let allow = at("http_access allow allowed_destinations");
        assert!(
            acl.is_some()
                && at("http_access deny !clients") < allow
                && allow < at("http_access deny internal"),
            "{rules:#?}"
        );
    }

    #[test]
    fn rejects_unusable_settings() {
        let mut s = settings();
        s.port = 0;
        assert_eq!(squid_conf(&s, None, FILES).unwrap_err().what, "proxy port");
        let mut s = settings();
        s.allowed_clients.clear();
        assert!(squid_conf(&s, None, Layout::Container).is_err());
    }

    #[test]
    fn a_password_line_shows_only_its_user() {
        let c = ProxyCredentials::parse("egress:s3cret").unwrap();
        let line = PasswordLine::new(&c, [7; 12]).unwrap();
        assert!(line.as_str().starts_with("egress:$6$"), "{}", line.as_str());
        assert!(!line.as_str().contains("s3cret"));
        assert_eq!(format!("{line:?}"), "PasswordLine(egress:<hash>)");
    }
}

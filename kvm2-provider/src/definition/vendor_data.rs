//! The cloud-init vendor data the provider puts in every seed: the QEMU guest
//! agent (address discovery depends on it) and Squid as the egress proxy.
//!
//! # Merge rule
//!
//! cloud-init reads vendor data first and the request's user data over it.
//! Both are `#cloud-config` documents; for every top-level key present in
//! both, **the user data wins and replaces the vendor value** (cloud-init's
//! default merge, `dict(replace)+list()+str()`). So:
//!
//! - user data that sets `packages` replaces this list: it must list
//!   `qemu-guest-agent` and `squid` itself if it still wants them;
//! - user data that sets `runcmd` or `write_files` replaces ours, and the
//!   proxy is then not configured by the provider;
//! - `vendor_data: {enabled: false}` in user data switches vendor data off
//!   entirely (the VM then gets neither agent nor proxy from the provider).
//!
//! Keys the user data does not mention keep the vendor values. Every value
//! written here is typed (port number, parsed address ranges), so nothing a
//! user configures can change the YAML's structure.

pub use provider_api::ProxyCredentials;
pub use provider_api::config::ProxySettings;
pub use provider_api::squid::{INTERNAL_DESTINATIONS, PasswordLine};
use provider_api::squid::{Layout, squid_conf};

use crate::Error;

/// Where Squid logs each request; Squid rotates it daily (the
/// `squid-rotate` timer the vendor data installs), keeping
/// [`ACCESS_LOG_KEEP`] old files.
pub const ACCESS_LOG_PATH: &str = "/var/log/squid/access.log";
/// Rotated access logs kept.
pub const ACCESS_LOG_KEEP: u32 = 7;

/// Squid's basic-auth password file (`user:$6$...`, SHA-512-crypt), when
/// the entry has `proxy.credentials_file`.
pub const PASSWORD_FILE_PATH: &str = "/etc/squid/passwd";

/// Where the Squid configuration is written. Debian's package keeps an
/// existing file (cloud-init installs with `--force-confold`), and the file
/// is written after package installation (`defer: true`) in any case.
pub const SQUID_CONFIG_PATH: &str = "/etc/squid/squid.conf";

/// Renders the vendor-data `#cloud-config` document from the config's
/// proxy settings (their client ranges are `Cidr`s, parsed once when the
/// config was read).
///
/// The proxy is a non-caching forward proxy that allows `CONNECT` to port
/// 443 only, from `allowed_clients` only, never to an internal destination
/// ([`INTERNAL_DESTINATIONS`]) unless `allowed_destinations` names it, and
/// logs every request to [`ACCESS_LOG_PATH`], rotated daily.
///
/// # Errors
/// [`Error::InvalidValue`] when the port is 0 or no client range is given
/// (a proxy nobody may use is a configuration mistake).
/// With `auth`, every request must also authenticate (basic, the
/// password stored as a SHA-512-crypt hash in [`PASSWORD_FILE_PATH`]): 407
/// without or with wrong credentials. The vendor data then holds the hash,
/// so it is as confidential as the user data beside it in the seed ISO.
pub fn render(settings: &ProxySettings, auth: Option<&PasswordLine>) -> Result<String, Error> {
    let password_line = auth.map(PasswordLine::as_str);
    let squid = squid_conf(
        settings,
        password_line.map(|_| PASSWORD_FILE_PATH),
        Layout::Files {
            path: ACCESS_LOG_PATH,
            keep: ACCESS_LOG_KEEP,
        },
    )
    .map_err(|e| Error::invalid(e.what, e.rule))?;
    let mut out = String::from(
        "#cloud-config\n\
         # Vendor data from the kvm2 provider. User data overrides any top-level\n\
         # key set here (see docs/kvm2-provider.md, \"Cloud-init\").\n\
         package_update: true\n\
         packages:\n  - qemu-guest-agent\n  - squid\n\
         write_files:\n",
    );
    out.push_str(&format!(
        "  - path: {SQUID_CONFIG_PATH}\n    permissions: '0644'\n    defer: true\n    content: |\n"
    ));
    for line in &squid {
        out.push_str("      ");
        out.push_str(line);
        out.push('\n');
    }
    if let Some(line) = &password_line {
        out.push_str(&format!(
            "  - path: {PASSWORD_FILE_PATH}\n    permissions: '0640'\n    owner: 'root:proxy'\n    defer: true\n    content: |\n      {line}\n"
        ));
    }
    // The daily rotation (the image has no logrotate): Squid renames the
    // files itself on `squid -k rotate`.
    out.push_str(
        "  - path: /etc/systemd/system/squid-rotate.service\n    permissions: '0644'\n    content: |\n      \
         [Unit]\n      Description=Rotate Squid's logs\n      [Service]\n      Type=oneshot\n      \
         ExecStart=/usr/sbin/squid -k rotate\n\
         \x20 - path: /etc/systemd/system/squid-rotate.timer\n    permissions: '0644'\n    content: |\n      \
         [Unit]\n      Description=Rotate Squid's logs daily\n      [Timer]\n      OnCalendar=daily\n      \
         Persistent=true\n      [Install]\n      WantedBy=timers.target\n",
    );
    out.push_str(
        "runcmd:\n  - [systemctl, enable, --now, qemu-guest-agent]\n  - [systemctl, restart, squid]\n  \
         - [systemctl, enable, --now, squid-rotate.timer]\n",
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use provider_api::config::values::Cidr;

    fn settings() -> ProxySettings {
        ProxySettings::new(
            3128,
            vec![
                Cidr::parse("10.0.0.0/8").unwrap(),
                Cidr::parse("fd00::/8").unwrap(),
            ],
        )
    }

    #[test]
    fn renders_agent_and_proxy() {
        let doc = render(&settings(), None).unwrap();
        assert!(doc.starts_with("#cloud-config\n"));
        assert!(doc.contains("  - qemu-guest-agent\n"));
        assert!(doc.contains("  - squid\n"));
        assert!(doc.contains("      http_port 3128\n"));
        assert!(doc.contains("      acl clients src 10.0.0.0/8 fd00::/8\n"));
        assert!(doc.contains("      http_access deny CONNECT !ssl_ports\n"));
        assert!(doc.contains("[systemctl, enable, --now, qemu-guest-agent]"));
        assert!(doc.contains("[systemctl, enable, --now, squid-rotate.timer]"));
        // Every line of squid.conf's block scalar is indented under
        // `content: |`, up to the next file.
        let block = squid_conf(&doc);
        assert_eq!(block.len(), 16, "{block:#?}");
        assert!(block.iter().all(|l| l.starts_with("      ")));
        let rules: Vec<&str> = block.iter().map(|l| l.trim()).collect();
        // Internal destinations are refused before clients are allowed.
        let deny_internal = rules.iter().position(|l| *l == "http_access deny internal");
        let allow_clients = rules.iter().position(|l| *l == "http_access allow clients");
        assert!(
            deny_internal.is_some() && deny_internal < allow_clients,
            "{rules:#?}"
        );
        assert!(rules.contains(&"acl internal dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.168.0.0/16 ::1 fc00::/7 fe80::/10"));
        assert!(rules.contains(&"access_log daemon:/var/log/squid/access.log squid"));
        assert!(!rules.iter().any(|l| l.contains("allowed_destinations")));
    }

    /// squid.conf's lines in the vendor data.
    fn squid_conf(doc: &str) -> Vec<&str> {
        doc.lines()
            .skip_while(|l| !l.ends_with("content: |"))
            .skip(1)
            .take_while(|l| !l.starts_with("  - path:") && !l.starts_with("runcmd"))
            .collect()
    }

    #[test]
    fn rejects_unusable_settings() {
        let mut s = settings();
        s.port = 0;
        assert!(render(&s, None).is_err());
        let mut s = settings();
        s.allowed_clients.clear();
        assert!(render(&s, None).is_err());
    }
}

//! Values a config keeps from a sample: an all-zero image digest, and
//! hosts and URLs in the names and addresses reserved for documentation
//! (RFC 2606 `.example`, `.invalid`, `example.com`; RFC 5737 and RFC 3849
//! address blocks). The config parses — they are well-formed — but nothing
//! can work until they are replaced, so `operator validate` refuses them
//! with what to put instead.

use std::net::IpAddr;

use super::values::HostAddress;
use super::{ConfigIssue, ProviderBlock, ProvidersConfig};

impl ProvidersConfig {
    /// Every placeholder value left in the config, with the instruction to
    /// replace it (empty when there is none).
    pub fn placeholders(&self) -> Vec<ConfigIssue> {
        let mut out = Vec::new();
        for (i, entry) in self.providers.iter().enumerate() {
            let ProviderBlock::Kvm2(k) = &entry.block else {
                continue;
            };
            let path = format!("providers[{i}].kvm2");
            for (j, host) in k.hosts.iter().enumerate() {
                if is_placeholder_host(&host.address) {
                    out.push(ConfigIssue {
                        path: format!("{path}.hosts[{j}].address"),
                        message: format!(
                            "{} is a placeholder (a documentation address): put your hypervisor host's address",
                            host.address
                        ),
                    });
                }
            }
            for (key, image) in &k.images {
                if image.sha256.to_string().bytes().all(|b| b == b'0') {
                    out.push(ConfigIssue {
                        path: format!("{path}.images.{key}.sha256"),
                        message: "is a placeholder (all zeros): put the sha256 that \
                                  `cargo xtask guest-image` printed for the image you serve"
                            .to_owned(),
                    });
                }
                let url_host = image.url.as_url().host_str().unwrap_or_default();
                let host = url_host.trim_start_matches('[').trim_end_matches(']');
                let placeholder = match host.parse::<IpAddr>() {
                    Ok(ip) => is_documentation_ip(ip),
                    Err(_) => is_placeholder_name(host),
                };
                if placeholder {
                    out.push(ConfigIssue {
                        path: format!("{path}.images.{key}.url"),
                        message: format!(
                            "{} is a placeholder (a documentation host): put the URL where you serve the guest image",
                            image.url
                        ),
                    });
                }
            }
        }
        out
    }
}

fn is_placeholder_host(address: &HostAddress) -> bool {
    match address {
        HostAddress::Ip(ip) => is_documentation_ip(*ip),
        HostAddress::Dns(name) => is_placeholder_name(name.as_str()),
    }
}

/// RFC 2606's reserved names.
fn is_placeholder_name(name: &str) -> bool {
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    ["example", "invalid"]
        .iter()
        .any(|tld| name == *tld || name.ends_with(&format!(".{tld}")))
        || ["example.com", "example.net", "example.org"]
            .iter()
            .any(|d| name == *d || name.ends_with(&format!(".{d}")))
}

/// RFC 5737 (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24) and RFC 3849
/// (2001:db8::/32).
fn is_documentation_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            matches!((a, b, c), (192, 0, 2) | (198, 51, 100) | (203, 0, 113))
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            s[0] == 0x2001 && s[1] == 0x0db8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_names_and_addresses_are_placeholders() {
        for name in [
            "kvm2.lan.example",
            "images.invalid",
            "example.com",
            "www.example.org",
        ] {
            assert!(is_placeholder_name(name), "{name}");
        }
        for name in ["kvm1.lan", "example.company.com", "invalidation.net"] {
            assert!(!is_placeholder_name(name), "{name}");
        }
        for ip in ["192.0.2.11", "198.51.100.7", "203.0.113.1", "2001:db8::1"] {
            assert!(is_documentation_ip(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["192.168.10.11", "10.0.0.1", "2001:db9::1"] {
            assert!(!is_documentation_ip(ip.parse().unwrap()), "{ip}");
        }
    }
}

//! Validated value types of the providers config: each has a `parse` that
//! is the only way to build it, and a `RULE` that error messages quote.

use std::fmt;
use std::net::IpAddr;
use std::path::{Component, Path};
use std::str::FromStr;

use crate::ident::{ObjectName, ParseError, validated_string};

/// An `http` or `https` URL with a host, no user info, no whitespace,
/// control characters or XML/shell-special characters, at most 2048 bytes.
///
/// The raw text is checked *before* URL parsing, because URL parsers
/// silently drop tabs and newlines (`"http://exa\nmple.com"` would become
/// `example.com`). It may hold `&`, `%`, `?`, `=` and `:` (URL syntax), so
/// it is not an inert name: volume names, file names and XML must never be
/// derived from it (use the provider entry and the image key).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HttpUrl(url::Url);

impl HttpUrl {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be an http(s) URL with a host, at most 2048 bytes, \
         without credentials, whitespace, control characters or any of < > \" ' ` \\ { } | ^";

    /// Parses `s`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = ParseError::new(Self::RULE);
        let allowed = |b: u8| {
            b.is_ascii_graphic()
                && !matches!(
                    b,
                    b'<' | b'>' | b'"' | b'\'' | b'`' | b'\\' | b'{' | b'}' | b'|' | b'^'
                )
        };
        if s.is_empty() || s.len() > 2048 || !s.bytes().all(allowed) {
            return Err(bad);
        }
        let url = url::Url::parse(s).map_err(|_| bad.clone())?;
        let scheme_ok = matches!(url.scheme(), "http" | "https");
        let host_ok = url.host_str().is_some_and(|h| !h.is_empty());
        let no_creds = url.username().is_empty() && url.password().is_none();
        if scheme_ok && host_ok && no_creds {
            Ok(HttpUrl(url))
        } else {
            Err(bad)
        }
    }

    /// The parsed URL.
    pub fn as_url(&self) -> &url::Url {
        &self.0
    }

    /// The URL text (normalised by the URL parser).
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl fmt::Debug for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

/// A SHA-256 digest, written as 64 hexadecimal characters (either case;
/// displayed lowercase).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sha256Digest([u8; 32]);

impl Sha256Digest {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be 64 hexadecimal characters (a SHA-256 digest)";

    /// Parses 64 hex characters.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut out = [0u8; 32];
        if s.len() != 64 {
            return Err(ParseError::new(Self::RULE));
        }
        hex::decode_to_slice(s, &mut out).map_err(|_| ParseError::new(Self::RULE))?;
        Ok(Sha256Digest(out))
    }

    /// The digest from its bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Sha256Digest(bytes)
    }

    /// The 32 digest bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex (64 characters).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Sha256Digest({self})")
    }
}

/// Where to reach a host: an IP address (v4 or v6, no zone) or a DNS name
/// (an [`ObjectName`]: lowercase labels joined by dots).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum HostAddress {
    /// An IP literal.
    Ip(IpAddr),
    /// A DNS name.
    Dns(ObjectName),
}

impl HostAddress {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be an IP address or a lowercase DNS name";

    /// Parses an IP literal or a DNS name.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(HostAddress::Ip(ip));
        }
        // A DNS name's labels are at most 63 characters (an object name's
        // parts need not be).
        if s.split('.').any(|label| label.len() > 63) {
            return Err(ParseError::new(Self::RULE));
        }
        ObjectName::parse(s)
            .map(HostAddress::Dns)
            .map_err(|_| ParseError::new(Self::RULE))
    }
}

impl fmt::Display for HostAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostAddress::Ip(ip) => write!(f, "{ip}"),
            HostAddress::Dns(n) => f.write_str(n.as_str()),
        }
    }
}

impl fmt::Debug for HostAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostAddress({self})")
    }
}

/// A TCP endpoint `host:port` (`[v6]:port` for an IPv6 literal): what a
/// health probe CONNECTs to through a proxy.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct HostPort {
    host: HostAddress,
    port: u16,
}

impl HostPort {
    /// The rule every value satisfies.
    pub const RULE: &'static str =
        "must be host:port (an IP address, [IPv6] or a lowercase DNS name, and a port 1-65535)";

    /// Parses `host:port`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(Self::RULE);
        let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
        let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(v6) => match v6.parse::<IpAddr>() {
                Ok(ip @ IpAddr::V6(_)) => HostAddress::Ip(ip),
                _ => return Err(bad()),
            },
            // A bare IPv6 literal has colons of its own: it needs brackets.
            None if host.contains(':') => return Err(bad()),
            None => HostAddress::parse(host).map_err(|_| bad())?,
        };
        let port = port
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(bad)?;
        Ok(HostPort { host, port })
    }

    /// `s` parsed, for constants: `127.0.0.1:443` should a constant break
    /// the rule (a unit test parses every constant passed here).
    pub(crate) fn parse_or_loopback(s: &str) -> HostPort {
        HostPort::parse(s).unwrap_or(HostPort {
            host: HostAddress::Ip(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
            port: 443,
        })
    }

    /// The host.
    pub fn host(&self) -> &HostAddress {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostAddress::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]:{}", self.port),
            host => write!(f, "{host}:{}", self.port),
        }
    }
}

impl fmt::Debug for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HostPort({self})")
    }
}

/// The rule text of [`BridgeName`].
const BRIDGE_NAME_RULE: &str = "must be a bridge name (1 to 15 characters from A-Z, a-z, 0-9, '_', '.' and '-', \
     starting with a letter or digit, without '..')";

fn is_bridge_name(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.len() <= 15
        && !s.contains("..")
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

validated_string!(
    /// A Linux bridge (network interface) name: 1 to 15 characters from
    /// `A-Z a-z 0-9 _ . -`, starting with a letter or digit, without `..`.
    /// Reaches the domain XML as `<source bridge='…'/>`.
    BridgeName,
    is_bridge_name,
    BRIDGE_NAME_RULE
);

/// The rule text of [`SshUser`].
const SSH_USER_RULE: &str = "must be a user name (1 to 32 characters from a-z, 0-9, '_' and '-', \
     starting with a letter or '_')";

fn is_ssh_user(s: &str) -> bool {
    let b = s.as_bytes();
    b.first()
        .is_some_and(|c| c.is_ascii_lowercase() || *c == b'_')
        && b.len() <= 32
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-'))
}

validated_string!(
    /// A POSIX user name for SSH: 1 to 32 characters from `a-z 0-9 _ -`,
    /// starting with a letter or `_`.
    SshUser,
    is_ssh_user,
    SSH_USER_RULE
);

/// An absolute, normalised file path: starts with `/`, no `.` or `..`
/// components, no empty components or trailing `/`, no whitespace, control
/// or non-XML (U+FFFE, U+FFFF) characters, at most 4096 bytes. The one path
/// rule of the workspace (kvm2's disk paths use it too).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AbsolutePath(String);

impl AbsolutePath {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be an absolute path without '.' or '..' components, \
         empty components, whitespace or control characters";

    /// Parses `s`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = ParseError::new(Self::RULE);
        // XML 1.0 cannot carry U+FFFE or U+FFFF: a path that must go into
        // libvirt XML is refused here, the one path rule.
        let printable = s.chars().all(|c| {
            !c.is_whitespace() && !c.is_control() && !matches!(c, '\u{FFFE}' | '\u{FFFF}')
        });
        if s.len() < 2 || s.len() > 4096 || !s.starts_with('/') || s.ends_with('/') || !printable {
            return Err(bad);
        }
        if s.split('/')
            .skip(1)
            .any(|seg| seg.is_empty() || seg == "." || seg == "..")
        {
            return Err(bad);
        }
        let p = Path::new(s);
        if !p
            .components()
            .skip(1)
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(bad);
        }
        Ok(AbsolutePath(s.to_owned()))
    }

    /// The path.
    pub fn as_path(&self) -> &Path {
        Path::new(&self.0)
    }

    /// The path as text (it was parsed from text, so it is UTF-8).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for AbsolutePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for AbsolutePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_path(), f)
    }
}

/// A size in bytes, written with a binary unit: `512MiB`, `2GiB`, `1TiB`
/// (an unsigned integer immediately followed by `MiB`, `GiB` or `TiB`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct ByteSize(u64);

impl ByteSize {
    /// The rule every written size satisfies.
    pub const RULE: &'static str = "must be a whole number followed by MiB, GiB or TiB (e.g. 2GiB)";

    /// One mebibyte.
    pub const MIB: u64 = 1 << 20;
    /// One gibibyte.
    pub const GIB: u64 = 1 << 30;
    /// One tebibyte.
    pub const TIB: u64 = 1 << 40;

    /// Parses `<digits><unit>`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`] (also on overflow).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(Self::RULE);
        let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        let (digits, unit) = s.split_at(split);
        if digits.is_empty() || digits.len() > 12 {
            return Err(bad());
        }
        let n: u64 = digits.parse().map_err(|_| bad())?;
        let mult = match unit {
            "MiB" => Self::MIB,
            "GiB" => Self::GIB,
            "TiB" => Self::TIB,
            _ => return Err(bad()),
        };
        n.checked_mul(mult).map(ByteSize).ok_or_else(bad)
    }

    /// A size from a byte count.
    pub const fn from_bytes(bytes: u64) -> Self {
        ByteSize(bytes)
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// The size in whole mebibytes (sizes written in config are always
    /// whole MiB).
    pub const fn mib(self) -> u64 {
        self.0 / Self::MIB
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b.is_multiple_of(Self::TIB) && b > 0 {
            write!(f, "{}TiB", b / Self::TIB)
        } else if b.is_multiple_of(Self::GIB) && b > 0 {
            write!(f, "{}GiB", b / Self::GIB)
        } else if b.is_multiple_of(Self::MIB) {
            write!(f, "{}MiB", b / Self::MIB)
        } else {
            write!(f, "{b}B")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ident::tests::assert_inert;
    use proptest::prelude::*;

    #[test]
    fn url_rules() {
        for ok in [
            "https://example.com/debian-12.qcow2",
            "http://10.0.0.1:8080/a?b=c",
            "https://[::1]/x",
        ] {
            assert!(HttpUrl::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ftp://example.com/x",
            "file:///etc/passwd",
            "https://user:pw@example.com/x",
            "https://user@example.com/x",
            "https://exa\nmple.com/x",
            "https://example.com/a b",
            "\thttps://example.com/x",
            "data:text/plain,hi",
            "example.com/x",
            "https://exämple.com/x",
            "https://example.com/it's",
            "https://example.com/<x>",
            "https://example.com/a\"b",
            "https://example.com\\x",
        ] {
            assert_eq!(
                HttpUrl::parse(bad).unwrap_err().rule(),
                HttpUrl::RULE,
                "{bad:?}"
            );
        }
        assert!(HttpUrl::parse(&format!("https://e.com/{}", "a".repeat(2048))).is_err());
    }

    #[test]
    fn sha256_rules() {
        let lower = "ab".repeat(32);
        let d = Sha256Digest::parse(&lower).unwrap();
        assert_eq!(d.to_string(), lower);
        assert_eq!(Sha256Digest::parse(&"AB".repeat(32)).unwrap(), d);
        for bad in [
            "",
            &"a".repeat(63),
            &"a".repeat(65),
            &"g".repeat(64),
            &format!("{} ", "a".repeat(63)),
        ] {
            assert_eq!(
                Sha256Digest::parse(bad).unwrap_err().rule(),
                Sha256Digest::RULE
            );
        }
    }

    #[test]
    fn the_default_probe_target_keeps_the_rule() {
        let d = crate::config::kvm2::DEFAULT_PROBE_TARGET;
        assert_eq!(HostPort::parse(d).unwrap().to_string(), d);
    }

    #[test]
    fn host_port_rules() {
        for (good, shown) in [
            ("deb.debian.org:443", "deb.debian.org:443"),
            ("10.0.0.1:8443", "10.0.0.1:8443"),
            ("[2001:db8::1]:443", "[2001:db8::1]:443"),
        ] {
            assert_eq!(HostPort::parse(good).unwrap().to_string(), shown);
        }
        for bad in [
            "",
            "deb.debian.org",
            "deb.debian.org:",
            "deb.debian.org:0",
            "deb.debian.org:65536",
            "2001:db8::1:443",
            "[10.0.0.1]:443",
            "Deb.Debian.org:443",
            ":443",
        ] {
            assert_eq!(
                HostPort::parse(bad).unwrap_err().rule(),
                HostPort::RULE,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn host_address_rules() {
        assert!(matches!(
            HostAddress::parse("192.168.1.10"),
            Ok(HostAddress::Ip(_))
        ));
        assert!(matches!(HostAddress::parse("::1"), Ok(HostAddress::Ip(_))));
        assert!(matches!(
            HostAddress::parse("kvm1.lan"),
            Ok(HostAddress::Dns(_))
        ));
        for bad in [
            "",
            "a b",
            "host/x",
            "fe80::1%eth0",
            "KVM1",
            "a..b",
            "-a",
            "host:22",
            // A DNS label is at most 63 characters (an object name's part
            // may be longer).
            &format!("{}.lan", "a".repeat(64)),
        ] {
            assert_eq!(
                HostAddress::parse(bad).unwrap_err().rule(),
                HostAddress::RULE,
                "{bad}"
            );
        }
    }

    #[test]
    fn bridge_rules() {
        for ok in ["br0", "virbr0", "br-lan", "eth0.100", "a_b"] {
            assert!(BridgeName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "br0'",
            "a b",
            "a/b",
            ".a",
            "a..b",
            "0123456789abcdef",
            "br<0>",
        ] {
            assert_eq!(
                BridgeName::parse(bad).unwrap_err().rule(),
                BridgeName::RULE,
                "{bad}"
            );
        }
    }

    #[test]
    fn ssh_user_rules() {
        for ok in ["root", "_svc", "kvm-user1"] {
            assert!(SshUser::parse(ok).is_ok());
        }
        for bad in ["", "Root", "1user", "a b", "a@b", &"a".repeat(33)] {
            assert_eq!(
                SshUser::parse(bad).unwrap_err().rule(),
                SshUser::RULE,
                "{bad}"
            );
        }
    }

    #[test]
    fn absolute_path_rules() {
        assert!(AbsolutePath::parse("/etc/kvm2/ssh/id_ed25519").is_ok());
        for bad in [
            "",
            "/",
            "relative/key",
            "/etc/../key",
            "/etc/./key",
            "/etc//key",
            "/etc/key/",
            "/etc/ke y",
            "/etc/key\n",
            "./key",
        ] {
            assert_eq!(
                AbsolutePath::parse(bad).unwrap_err().rule(),
                AbsolutePath::RULE,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn byte_size_rules() {
        assert_eq!(ByteSize::parse("512MiB").unwrap().bytes(), 512 << 20);
        assert_eq!(ByteSize::parse("2GiB").unwrap().mib(), 2048);
        assert_eq!(ByteSize::parse("1TiB").unwrap().bytes(), 1 << 40);
        assert_eq!(ByteSize::parse("2GiB").unwrap().to_string(), "2GiB");
        for bad in [
            "",
            "2",
            "GiB",
            "2 GiB",
            "2gib",
            "2GB",
            "-1GiB",
            "1.5GiB",
            "999999999999999TiB",
            "2GiB ",
        ] {
            assert_eq!(
                ByteSize::parse(bad).unwrap_err().rule(),
                ByteSize::RULE,
                "{bad:?}"
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn names_are_inert(s in ".{0,40}") {
            if let Ok(b) = BridgeName::parse(&s) { assert_inert(b.as_str()); }
            if let Ok(u) = SshUser::parse(&s) { assert_inert(u.as_str()); }
            if let Ok(HostAddress::Dns(n)) = HostAddress::parse(&s) { assert_inert(n.as_str()); }
        }

        #[test]
        fn urls_carry_no_whitespace_or_credentials(s in "(https?://)?[a-z0-9@:/ .\t\n%<>\"'-]{0,40}") {
            if let Ok(u) = HttpUrl::parse(&s) {
                prop_assert!(!u.as_str().chars().any(|c| c.is_whitespace() || c.is_control()));
                prop_assert!(!u.as_str().contains(['<', '>', '"', '\'']));
                prop_assert!(u.as_url().username().is_empty());
                prop_assert!(matches!(u.as_url().scheme(), "http" | "https"));
            }
        }

        #[test]
        fn paths_have_no_parent_components(s in "[a-z/. \n]{0,30}") {
            if let Ok(p) = AbsolutePath::parse(&s) {
                prop_assert!(p.as_path().is_absolute());
                prop_assert!(p.as_path().components().all(|c| !matches!(c, Component::ParentDir | Component::CurDir)));
                prop_assert!(!s.contains(char::is_whitespace));
            }
        }

        #[test]
        fn sizes_never_panic(s in "[0-9]{0,25}(MiB|GiB|TiB|B)?") {
            let _ = ByteSize::parse(&s);
        }
    }
}

/// An IP network in CIDR notation (`10.0.0.0/8`, `fd00::/8`): an address
/// with no host bits set and a prefix length within its family's width.
///
/// It reaches the guest's Squid config, so nothing but an address, `/` and a
/// number can be in it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be an IP network in CIDR notation with no host bits set, \
         e.g. 10.0.0.0/8 or fd00::/8";

    /// Parses `s`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = ParseError::new(Self::RULE);
        let (addr, prefix) = s.split_once('/').ok_or(bad.clone())?;
        let network = IpAddr::from_str(addr).map_err(|_| bad.clone())?;
        if prefix.is_empty() || prefix.len() > 3 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad);
        }
        let prefix: u8 = prefix.parse().map_err(|_| bad.clone())?;
        let (bits, width) = match network {
            IpAddr::V4(a) => (u128::from(u32::from(a)) << 96, 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        };
        if prefix > width {
            return Err(bad);
        }
        // Host bits are those below the prefix, counted from the top of the
        // 128-bit value the address was widened into.
        let host_mask = u128::MAX.checked_shr(u32::from(prefix)).unwrap_or(0);
        if bits & host_mask != 0 {
            return Err(bad);
        }
        Ok(Cidr { network, prefix })
    }

    /// The network address.
    pub fn network(&self) -> IpAddr {
        self.network
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl fmt::Debug for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Cidr({self})")
    }
}

/// A container image reference: `[registry/]repository[:tag][@digest]`,
/// e.g. `registry.example/egress/squid:6.13`. 1 to 255 characters from
/// lowercase letters, digits and `.`, `_`, `-`, `/`, `:`, `@`, uppercase
/// letters only in a tag or digest; it starts with a letter or digit and
/// holds no whitespace, so it cannot change the manifest it is written
/// into.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ImageReference(String);

impl ImageReference {
    /// The rule every value satisfies.
    pub const RULE: &'static str = "must be a container image reference \
        ([registry/]repository[:tag][@digest], 1 to 255 characters, lowercase \
        repository, starting with a letter or digit)";

    /// Parses a reference.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`].
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(Self::RULE);
        if s.is_empty() || s.len() > 255 {
            return Err(bad());
        }
        if !s.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(bad());
        }
        // Uppercase is allowed only after the last `/` once a `:` or `@`
        // started the tag or digest.
        let repo_end = s.rfind('/').map_or(0, |i| i + 1);
        let tag_start = s[repo_end..]
            .find([':', '@'])
            .map_or(s.len(), |i| repo_end + i);
        let ok = s.bytes().enumerate().all(|(i, b)| {
            b.is_ascii_lowercase()
                || b.is_ascii_digit()
                || matches!(b, b'.' | b'_' | b'-' | b'/' | b':' | b'@')
                || (i > tag_start && b.is_ascii_uppercase())
        });
        if !ok || s.contains("//") || s.ends_with(['/', ':', '@']) {
            return Err(bad());
        }
        Ok(ImageReference(s.to_owned()))
    }

    /// The reference as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ImageReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImageReference({:?})", self.0)
    }
}

/// CPU in thousandths of a core, written as Kubernetes writes quantities of
/// CPU: whole cores (`2`) or millicores (`250m`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct MilliCpu(u32);

impl MilliCpu {
    /// The rule every written value satisfies.
    pub const RULE: &'static str =
        "must be whole cores (e.g. 2) or millicores (e.g. 250m), from 10m to 64";
    /// The least CPU a value may ask for.
    pub const MIN: MilliCpu = MilliCpu(10);
    /// The most CPU a value may ask for (64 cores).
    pub const MAX: MilliCpu = MilliCpu(64_000);

    /// Parses `<digits>` or `<digits>m`.
    ///
    /// # Errors
    /// [`ParseError`] with [`Self::RULE`] (also out of range).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::new(Self::RULE);
        let (digits, scale) = match s.strip_suffix('m') {
            Some(d) => (d, 1),
            None => (s, 1000),
        };
        if digits.is_empty() || digits.len() > 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u32 = digits.parse().map_err(|_| bad())?;
        let m = MilliCpu(n.checked_mul(scale).ok_or_else(bad)?);
        if (Self::MIN..=Self::MAX).contains(&m) {
            Ok(m)
        } else {
            Err(bad())
        }
    }

    /// Thousandths of a core.
    pub const fn millis(self) -> u32 {
        self.0
    }
}

impl fmt::Display for MilliCpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_multiple_of(1000) {
            write!(f, "{}", self.0 / 1000)
        } else {
            write!(f, "{}m", self.0)
        }
    }
}

#[cfg(test)]
mod kubernetes_value_tests {
    use super::*;

    #[test]
    fn image_references() {
        for good in [
            "squid",
            "localhost/egress-proxies/squid:5.7-abc",
            "registry.example:5000/egress/squid@sha256:0123abcdef",
            "docker.io/library/debian:Bookworm",
        ] {
            assert_eq!(ImageReference::parse(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "-squid",
            "Squid",
            "squid latest",
            "squid\n",
            "a//b",
            "squid:",
            "Registry/squid:1",
            &"a".repeat(256),
        ] {
            assert!(ImageReference::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cpu_quantities() {
        assert_eq!(MilliCpu::parse("250m").unwrap().millis(), 250);
        assert_eq!(MilliCpu::parse("2").unwrap().millis(), 2000);
        assert_eq!(MilliCpu::parse("2").unwrap().to_string(), "2");
        assert_eq!(MilliCpu::parse("1500m").unwrap().to_string(), "1500m");
        for bad in ["", "m", "0", "5m", "65", "0.5", "-1", "1M", "9999999"] {
            assert!(MilliCpu::parse(bad).is_err(), "{bad:?}");
        }
    }
}

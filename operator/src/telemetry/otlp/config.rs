//! Where and how spans are exported, from the standard
//! `OTEL_EXPORTER_OTLP_*` environment variables (a pure function of them,
//! unit tested).

use std::time::Duration;

/// The export settings; `None` from [`OtlpConfig::from_env`] when no
/// endpoint is set (export off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpConfig {
    /// `host:port` to connect to.
    pub authority: String,
    /// The request path (`/v1/traces` under the base endpoint).
    pub path: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`), e.g. an API
    /// key. Never logged.
    pub headers: Vec<(String, String)>,
    /// Bound of one export request (connect, send, answer).
    pub timeout: Duration,
    /// `service.name` of the resource.
    pub service_name: String,
}

/// Why the environment's settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The endpoint is not an `http://host[:port][/path]` URL.
    #[error("{variable}={value:?}: {reason}")]
    Endpoint {
        /// The variable that set it.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A protocol other than `http/protobuf` was asked for.
    #[error("{variable}={value:?}: only http/protobuf is supported")]
    Protocol {
        /// The variable that set it.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The timeout is not a number of milliseconds.
    #[error("{variable}={value:?}: not a number of milliseconds")]
    Timeout {
        /// The variable that set it.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// A header is not `key=value`.
    #[error("OTEL_EXPORTER_OTLP_HEADERS: entry {index} is not key=value")]
    Header {
        /// Its position (from 1); the text is not quoted (it may be a key).
        index: usize,
    },
}

/// The default service name.
pub const SERVICE_NAME: &str = "egress-proxies-operator";

impl OtlpConfig {
    /// The settings `var` (an environment lookup) describes: the traces
    /// endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/traces`), headers, timeout
    /// (`..._TRACES_TIMEOUT`, `..._TIMEOUT`, ms, default 10 s), protocol
    /// (`http/protobuf` only), `OTEL_SERVICE_NAME`. `OTEL_TRACES_EXPORTER=none`
    /// turns export off.
    ///
    /// # Errors
    /// [`ConfigError`] naming the variable.
    pub fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, ConfigError> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if get("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none") {
            return Ok(None);
        }
        let (variable, value, append) = match (
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(v), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, false),
            (None, Some(v)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", v, true),
            (None, None) => return Ok(None),
        };
        for protocol in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(p) = get(protocol) {
                if p.trim() != "http/protobuf" {
                    return Err(ConfigError::Protocol {
                        variable: protocol,
                        value: p,
                    });
                }
                break;
            }
        }
        let bad = |reason| ConfigError::Endpoint {
            variable,
            value: value.clone(),
            reason,
        };
        let rest = match value.trim().strip_prefix("http://") {
            Some(rest) => rest,
            None if value.trim().starts_with("https://") => {
                return Err(bad(
                    "https is not supported: export to a collector's plain-HTTP port (4318) \
                     inside the cluster or node",
                ));
            }
            None => return Err(bad("not an http:// URL")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("no host (or credentials in the URL)"));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        let path = if append {
            format!("{}/v1/traces", path.trim_end_matches('/'))
        } else if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        };
        let mut headers = Vec::new();
        if let Some(list) =
            get("OTEL_EXPORTER_OTLP_TRACES_HEADERS").or_else(|| get("OTEL_EXPORTER_OTLP_HEADERS"))
        {
            for (i, entry) in list.split(',').enumerate() {
                let (k, v) = entry
                    .split_once('=')
                    .filter(|(k, _)| !k.trim().is_empty())
                    .ok_or(ConfigError::Header { index: i + 1 })?;
                headers.push((k.trim().to_owned(), percent_decode(v.trim())));
            }
        }
        let mut timeout = Duration::from_secs(10);
        for variable in [
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ] {
            if let Some(v) = get(variable) {
                let ms: u64 = v.trim().parse().map_err(|_| ConfigError::Timeout {
                    variable,
                    value: v.clone(),
                })?;
                timeout = Duration::from_millis(ms.max(1));
                break;
            }
        }
        Ok(Some(Self {
            authority,
            path,
            headers,
            timeout,
            service_name: get("OTEL_SERVICE_NAME").unwrap_or_else(|| SERVICE_NAME.to_owned()),
        }))
    }
}

/// `%XX` escapes decoded (the headers variable is W3C-baggage encoded);
/// anything malformed is kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push(((hex(h).unwrap_or(0) << 4) | hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<Option<OtlpConfig>, ConfigError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        OtlpConfig::from_env(&move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn no_endpoint_or_none_means_off() {
        assert_eq!(config(&[]).unwrap(), None);
        assert_eq!(
            config(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_TRACES_EXPORTER", "none")
            ])
            .unwrap(),
            None
        );
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_the_traces_one_is_used_as_is() {
        let c = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")])
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("collector:4318", "/v1/traces")
        );
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(c.service_name, SERVICE_NAME);
        let c = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c/otlp/")])
            .unwrap()
            .unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("c:80", "/otlp/v1/traces")
        );
        let c = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:1"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://10.0.0.1:9999/x",
            ),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%3Db, team = ops"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_SERVICE_NAME", "op-a"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.authority.as_str(), c.path.as_str()),
            ("10.0.0.1:9999", "/x")
        );
        assert_eq!(
            c.headers,
            [
                ("api-key".to_owned(), "a=b".to_owned()),
                ("team".to_owned(), "ops".to_owned())
            ]
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert_eq!(c.service_name, "op-a");
    }

    #[test]
    fn what_cannot_be_used_names_its_variable() {
        let e = config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c:4318")]).unwrap_err();
        assert!(e.to_string().contains("https is not supported"), "{e}");
        assert!(config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "c:4318")]).is_err());
        assert!(config(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://u:p@c:4318")]).is_err());
        let e = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ])
        .unwrap_err();
        assert!(
            e.to_string().starts_with("OTEL_EXPORTER_OTLP_PROTOCOL"),
            "{e}"
        );
        let e = config(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "secret-token"),
        ])
        .unwrap_err();
        // The entry is not quoted: it may be a credential.
        assert!(!e.to_string().contains("secret-token"), "{e}");
        assert!(
            config(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "10s")
            ])
            .is_err()
        );
    }
}

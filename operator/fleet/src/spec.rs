//! The `Proxy` spec as plain data ([`ProxySpec`]), its validation into
//! provider-api types ([`ValidSpec`]), and the immutability check.
//!
//! The spec is what a user writes, so every field is text until
//! [`ProxySpec::validate`] parses it; a failure is an input error the
//! reconciler reports as a condition, never a panic.

use provider_api::{Identifier, ObjectName, Placement};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The Secret key read for cloud-init user data when the reference names
/// none.
pub const DEFAULT_USER_DATA_KEY: &str = "user-data";

/// What one `Proxy` asks for (the CRD's `spec`, field names in camelCase).
///
/// Immutable once an instance is made: the reconciler keeps using the spec
/// recorded in the status (`appliedSpec`) and reports an edit as
/// [`Reason::SpecImmutable`](crate::Reason::SpecImmutable).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxySpec {
    /// The provider entry (a `name` in the providers config) that makes
    /// this proxy; absent for an existing proxy (`existing`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(transform = crate::status::no_schema_default)]
    pub provider: String,
    /// An existing proxy to probe and publish, instead of one a provider
    /// makes (an *unmanaged* proxy): no provider is ever called for it.
    /// Exclusive with `provider` and the fields only a made proxy uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub existing: Option<ExistingProxy>,
    /// The machine type (a key of the entry's machine types); the entry's
    /// default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// The image key (a key of the entry's images); the entry's default when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Where to run: an optional host and how strictly to hold to it.
    #[serde(default, skip_serializing_if = "PlacementSpec::is_any")]
    pub placement: PlacementSpec,
    /// The Secret (in the Proxy's namespace) holding cloud-init user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<SecretRef>,
}

/// `spec.existing`: where an existing proxy listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExistingProxy {
    /// Its IP address (v4 or v6).
    pub address: String,
    /// Its port.
    #[schemars(range(min = 1))]
    pub port: u16,
}

/// `spec.placement`: an optional host and how strictly to hold to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// A host (target) of the provider entry; any host when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// How strictly `host` is meant: `Prefer` (that host if usable,
    /// elsewhere otherwise) or `Require` (that host only).
    #[serde(default)]
    pub policy: PlacementPolicy,
}

impl PlacementSpec {
    /// No host asked for (the provider's own spreading).
    pub fn is_any(&self) -> bool {
        self.host.is_none() && self.policy == PlacementPolicy::Prefer
    }
}

/// How strictly [`PlacementSpec::host`] is meant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PlacementPolicy {
    /// On that host if it is usable, elsewhere otherwise.
    #[default]
    Prefer,
    /// On that host only (a host is then required).
    Require,
}

/// A reference to a key of a Secret in the Proxy's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// The Secret's name.
    pub name: String,
    /// The key in the Secret's data; `user-data` when absent.
    #[serde(default = "default_user_data_key")]
    pub key: String,
}

fn default_user_data_key() -> String {
    DEFAULT_USER_DATA_KEY.to_owned()
}

/// A spec whose every field parsed: what a `CreateRequest` is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ValidSpec {
    /// The provider entry.
    pub provider: Identifier,
    /// The machine type, if given.
    pub machine_type: Option<Identifier>,
    /// The image key, if given.
    pub image: Option<Identifier>,
    /// Where to run.
    pub placement: Placement,
    /// The cloud-init Secret, if any (name and key checked).
    pub cloud_init: Option<SecretRef>,
}

/// One problem with a spec: the field's path and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecIssue {
    /// The field's path, e.g. `spec.machineType`.
    pub field: &'static str,
    /// What is wrong (the rule it breaks).
    pub message: String,
}

impl std::fmt::Display for SpecIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Whether `key` may be a key of a Secret's data (Kubernetes' rule: 1 to 253
/// characters from `a-z A-Z 0-9 - _ .`, not `.` or `..`).
fn is_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl ProxySpec {
    /// Parses every field; returns every problem at once.
    ///
    /// # Errors
    /// One [`SpecIssue`] per bad field: no provider, `existing` set (see
    /// [`existing_address`](Self::existing_address)), a provider, machine
    /// type, image or host that is not an identifier, `Require` without a
    /// host, a Secret name that is not an object name or a key that is not
    /// a Secret key.
    pub fn validate(&self) -> Result<ValidSpec, Vec<SpecIssue>> {
        let mut issues = Vec::new();
        if self.provider.is_empty() {
            issues.push(SpecIssue {
                field: "spec.provider",
                message: "is required: set spec.provider (a proxy a provider makes) or \
                          spec.existing (a proxy that already runs)"
                    .to_owned(),
            });
        }
        if self.existing.is_some() {
            issues.push(SpecIssue {
                field: "spec.existing",
                message: "names an existing proxy, which no provider makes".to_owned(),
            });
        }
        let mut ident = |field: &'static str, text: &str| match Identifier::parse(text) {
            Ok(id) => Some(id),
            Err(e) => {
                issues.push(SpecIssue {
                    field,
                    message: format!("{} (got {:?})", e.rule(), crate::error::quoted(text)),
                });
                None
            }
        };
        let provider = if self.provider.is_empty() {
            None
        } else {
            ident("spec.provider", &self.provider)
        };
        let machine_type = self
            .machine_type
            .as_deref()
            .map(|m| ident("spec.machineType", m));
        let image = self.image.as_deref().map(|i| ident("spec.image", i));
        let host = self
            .placement
            .host
            .as_deref()
            .map(|h| ident("spec.placement.host", h));
        let placement = match (host, self.placement.policy) {
            (None, PlacementPolicy::Prefer) => Some(Placement::Any),
            (None, PlacementPolicy::Require) => {
                issues.push(SpecIssue {
                    field: "spec.placement.host",
                    message: "is required when spec.placement.policy is Require".to_owned(),
                });
                None
            }
            (Some(None), _) => None,
            (Some(Some(h)), PlacementPolicy::Prefer) => Some(Placement::Prefer(h)),
            (Some(Some(h)), PlacementPolicy::Require) => Some(Placement::Require(h)),
        };
        if let Some(r) = &self.cloud_init {
            if let Err(e) = ObjectName::parse(&r.name) {
                issues.push(SpecIssue {
                    field: "spec.cloudInit.name",
                    message: format!("{} (got {:?})", e.rule(), crate::error::quoted(&r.name)),
                });
            }
            if !is_secret_key(&r.key) {
                issues.push(SpecIssue {
                    field: "spec.cloudInit.key",
                    message: format!(
                        "must be a Secret key (1 to 253 characters from a-z, A-Z, 0-9, '-', '_' \
                         and '.') (got {:?})",
                        crate::error::quoted(&r.key)
                    ),
                });
            }
        }
        match (provider, machine_type, image, placement) {
            (Some(provider), machine_type, image, Some(placement)) if issues.is_empty() => {
                Ok(ValidSpec {
                    provider,
                    machine_type: machine_type.flatten(),
                    image: image.flatten(),
                    placement,
                    cloud_init: self.cloud_init.clone(),
                })
            }
            _ => Err(issues),
        }
    }

    /// The address of an existing proxy (`spec.existing`), when the spec
    /// names one validly and nothing else.
    ///
    /// # Errors
    /// `Ok(None)` for a spec without `existing` (a made proxy: see
    /// [`validate`](Self::validate)); one [`SpecIssue`] per problem: an
    /// address that is not an IP, port 0, or a field only a made proxy
    /// uses (`provider`, `machineType`, `image`, `placement`, `cloudInit`)
    /// set beside it.
    pub fn existing_address(&self) -> Result<Option<std::net::SocketAddr>, Vec<SpecIssue>> {
        let Some(existing) = &self.existing else {
            return Ok(None);
        };
        let mut issues = Vec::new();
        let ip = existing.address.parse::<std::net::IpAddr>();
        if ip.is_err() {
            issues.push(SpecIssue {
                field: "spec.existing.address",
                message: format!(
                    "must be an IP address (got {:?})",
                    crate::error::quoted(&existing.address)
                ),
            });
        }
        if existing.port == 0 {
            issues.push(SpecIssue {
                field: "spec.existing.port",
                message: "must be 1 to 65535".to_owned(),
            });
        }
        for (set, field) in [
            (!self.provider.is_empty(), "spec.provider"),
            (self.machine_type.is_some(), "spec.machineType"),
            (self.image.is_some(), "spec.image"),
            (!self.placement.is_any(), "spec.placement"),
            (self.cloud_init.is_some(), "spec.cloudInit"),
        ] {
            if set {
                issues.push(SpecIssue {
                    field,
                    message: "must not be set with spec.existing (an existing proxy is not \
                              made by a provider)"
                        .to_owned(),
                });
            }
        }
        match ip {
            Ok(ip) if issues.is_empty() => Ok(Some(std::net::SocketAddr::new(ip, existing.port))),
            _ => Err(issues),
        }
    }

    /// The paths of the fields that differ between `self` (the spec an
    /// instance was made from) and `edited`, in declaration order; empty when
    /// they are equal.
    pub fn changed_fields(&self, edited: &ProxySpec) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if self.provider != edited.provider {
            changed.push("spec.provider");
        }
        if self.existing != edited.existing {
            changed.push("spec.existing");
        }
        if self.machine_type != edited.machine_type {
            changed.push("spec.machineType");
        }
        if self.image != edited.image {
            changed.push("spec.image");
        }
        if self.placement != edited.placement {
            changed.push("spec.placement");
        }
        if self.cloud_init != edited.cloud_init {
            changed.push("spec.cloudInit");
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ProxySpec {
        ProxySpec {
            provider: "kvm2-home".into(),
            ..ProxySpec::default()
        }
    }

    fn fields(s: &ProxySpec) -> Vec<&'static str> {
        s.validate().unwrap_err().iter().map(|i| i.field).collect()
    }

    #[test]
    fn a_minimal_spec_is_valid_with_defaults() {
        let v = spec().validate().unwrap();
        assert_eq!(v.provider.as_str(), "kvm2-home");
        assert_eq!(v.placement, Placement::Any);
        assert_eq!((v.machine_type, v.image, v.cloud_init), (None, None, None));
    }

    #[test]
    fn placement_maps_to_the_provider_placement() {
        let mut s = spec();
        s.placement.host = Some("host1".into());
        let h = Identifier::parse("host1").unwrap();
        assert_eq!(
            s.validate().unwrap().placement,
            Placement::Prefer(h.clone())
        );
        s.placement.policy = PlacementPolicy::Require;
        assert_eq!(s.validate().unwrap().placement, Placement::Require(h));
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let s = ProxySpec {
            provider: "Kvm2".into(),
            existing: None,
            machine_type: Some("small/../x".into()),
            image: Some("".into()),
            placement: PlacementSpec {
                host: None,
                policy: PlacementPolicy::Require,
            },
            cloud_init: Some(SecretRef {
                name: "UPPER".into(),
                key: "a/b".into(),
            }),
        };
        assert_eq!(
            fields(&s),
            [
                "spec.provider",
                "spec.machineType",
                "spec.image",
                "spec.placement.host",
                "spec.cloudInit.name",
                "spec.cloudInit.key"
            ]
        );
    }

    #[test]
    fn a_bad_host_is_reported_once() {
        let mut s = spec();
        s.placement.host = Some("Host 1".into());
        assert_eq!(fields(&s), ["spec.placement.host"]);
    }

    #[test]
    fn secret_keys_follow_the_kubernetes_rule() {
        for ok in ["user-data", "user_data.yaml", "A", "a.b"] {
            assert!(is_secret_key(ok), "{ok}");
        }
        for bad in ["", ".", "..", "a/b", "a b", &"k".repeat(254)] {
            assert!(!is_secret_key(bad), "{bad}");
        }
    }

    #[test]
    fn changed_fields_names_each_edit() {
        let a = spec();
        assert!(a.changed_fields(&a).is_empty());
        let mut b = a.clone();
        b.image = Some("debian-13".into());
        b.placement.host = Some("h2".into());
        assert_eq!(a.changed_fields(&b), ["spec.image", "spec.placement"]);
        let mut c = a.clone();
        c.provider = "other".into();
        c.machine_type = Some("big".into());
        c.cloud_init = Some(SecretRef {
            name: "s".into(),
            key: DEFAULT_USER_DATA_KEY.into(),
        });
        assert_eq!(
            a.changed_fields(&c),
            ["spec.provider", "spec.machineType", "spec.cloudInit"]
        );
    }

    #[test]
    fn serde_uses_camel_case_and_defaults() {
        let s: ProxySpec = serde_json::from_str(
            r#"{"provider":"p","machineType":"small","cloudInit":{"name":"ci"},
                "placement":{"host":"h1","policy":"Require"}}"#,
        )
        .unwrap();
        assert_eq!(s.machine_type.as_deref(), Some("small"));
        assert_eq!(s.cloud_init.as_ref().unwrap().key, DEFAULT_USER_DATA_KEY);
        assert_eq!(s.placement.policy, PlacementPolicy::Require);
        let json = serde_json::to_value(spec()).unwrap();
        assert_eq!(json, serde_json::json!({"provider": "kvm2-home"}));
    }

    #[test]
    fn an_existing_proxy_is_an_address_and_nothing_else() {
        let existing = |address: &str, port: u16| ProxySpec {
            existing: Some(ExistingProxy {
                address: address.into(),
                port,
            }),
            ..ProxySpec::default()
        };
        assert_eq!(
            existing("10.0.0.9", 3128).existing_address(),
            Ok(Some("10.0.0.9:3128".parse().unwrap()))
        );
        assert_eq!(spec().existing_address(), Ok(None), "a made proxy");
        let mut both = existing("proxy.lan", 0);
        both.provider = "kvm2-home".into();
        both.image = Some("debian".into());
        let fields: Vec<&str> = both
            .existing_address()
            .unwrap_err()
            .iter()
            .map(|i| i.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.existing.address",
                "spec.existing.port",
                "spec.provider",
                "spec.image"
            ]
        );
        // Neither form: the message says what to set.
        let neither = ProxySpec::default().validate().unwrap_err();
        assert_eq!(neither[0].field, "spec.provider");
        assert!(
            neither[0].message.contains("spec.existing"),
            "{}",
            neither[0].message
        );
        // A made proxy's validation refuses `existing` (a pool template).
        let issues = existing("10.0.0.9", 3128).validate().unwrap_err();
        assert!(issues.iter().any(|i| i.field == "spec.existing"));
    }
}

//! The `ProxyPool` spec as plain data ([`ProxyPoolSpec`]), its validation
//! ([`ProxyPoolSpec::validate`]) and the template's hash.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::spec::{ProxySpec, SpecIssue};

/// The most replicas a pool may ask for.
pub const MAX_REPLICAS: u32 = 10_000;
/// The longest pool name: its members are named
/// `<pool>-<template hash, 8 hex>-<index>`, and each is a Proxy name whose
/// labels (dot-separated parts) must stay within 63 characters, with room
/// for five-digit indexes.
pub const MAX_POOL_NAME: usize = 63 - 1 - HASH_LEN - 1 - 5;
/// Hex digits of the template hash in member names and labels.
pub const HASH_LEN: usize = 8;

/// What a `ProxyPool` asks for (the CRD's `spec`, field names in camelCase):
/// `replicas` Proxies made from `template`, spread over the provider entry's
/// hosts, replaced by rolling when the template changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyPoolSpec {
    /// How many members (Proxies) the pool keeps (the scale subresource's
    /// `spec.replicas`).
    #[serde(default = "one")]
    #[schemars(range(max = 10000))]
    pub replicas: u32,
    /// What every member is made from.
    pub template: ProxyTemplate,
    /// How members spread over the entry's hosts.
    #[serde(default)]
    pub spread: SpreadSpec,
    /// How a template change rolls the pool.
    #[serde(default)]
    pub strategy: RolloutStrategy,
}

/// A member's labels, annotations and spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyTemplate {
    /// Labels and annotations every member gets (the pool's own labels
    /// `egress-proxies.io/pool` and `egress-proxies.io/pool-template` are
    /// added and win).
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    /// The members' spec. Without `placement.host` the pool chooses each
    /// member's host (spread); with one, every member asks for that host.
    pub spec: ProxySpec,
}

/// The part of a member's metadata the template sets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMetadata {
    /// No labels and no annotations.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// `spec.spread`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpreadSpec {
    /// The largest difference in members between two ready hosts that the
    /// pool calls spread (`Spread` condition). New members always go to
    /// the ready host with the fewest; running members are not moved.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub max_skew: u32,
}

impl Default for SpreadSpec {
    fn default() -> Self {
        SpreadSpec { max_skew: 1 }
    }
}

/// `spec.strategy`: how far a roll may go below and above `replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// How many of `replicas` may be un-healthy because of the roll: old
    /// members are deleted only while at least `replicas - maxUnavailable`
    /// members are `Healthy`.
    #[serde(default)]
    pub max_unavailable: u32,
    /// How many members beyond `replicas` a roll may make (new members
    /// first, then old ones go).
    #[serde(default = "one")]
    pub max_surge: u32,
}

impl Default for RolloutStrategy {
    fn default() -> Self {
        RolloutStrategy {
            max_unavailable: 0,
            max_surge: 1,
        }
    }
}

fn one() -> u32 {
    1
}

/// A pool spec that validated: what [`Pool::plan`](crate::pool::Pool::plan)
/// works from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidPool {
    /// The pool's name.
    pub name: String,
    /// The spec.
    pub spec: ProxyPoolSpec,
    /// The template's hash ([`template_hash`]).
    pub template_hash: String,
}

impl ProxyPoolSpec {
    /// Checks the spec and the pool's name; returns every problem at once.
    ///
    /// # Errors
    /// One [`SpecIssue`] per problem: a name members cannot be named after,
    /// more than [`MAX_REPLICAS`], a `maxSkew` of 0, a strategy that can
    /// neither surge nor go below `replicas` (both 0), or a template spec
    /// that does not validate as a Proxy's.
    pub fn validate(&self, pool_name: &str) -> Result<ValidPool, Vec<SpecIssue>> {
        let mut issues = Vec::new();
        if !is_pool_name(pool_name) {
            issues.push(SpecIssue {
                field: "metadata.name",
                message: format!(
                    "must be a DNS label of at most {MAX_POOL_NAME} characters (lower-case \
                     a-z, 0-9 and '-'), as members are named \
                     <pool>-<{HASH_LEN} hex>-<index> (got {:?})",
                    crate::error::quoted(pool_name)
                ),
            });
        }
        if self.replicas > MAX_REPLICAS {
            issues.push(SpecIssue {
                field: "spec.replicas",
                message: format!("must be at most {MAX_REPLICAS} (got {})", self.replicas),
            });
        }
        if self.spread.max_skew == 0 {
            issues.push(SpecIssue {
                field: "spec.spread.maxSkew",
                message: "must be at least 1".to_owned(),
            });
        }
        if self.strategy.max_surge == 0 && self.strategy.max_unavailable == 0 {
            issues.push(SpecIssue {
                field: "spec.strategy",
                message: "maxSurge and maxUnavailable cannot both be 0 (a roll could not \
                          start)"
                    .to_owned(),
            });
        }
        if let Err(template) = self.template.spec.validate() {
            issues.extend(template.into_iter().map(|i| SpecIssue {
                field: template_field(i.field),
                message: i.message,
            }));
        }
        if issues.is_empty() {
            Ok(ValidPool {
                name: pool_name.to_owned(),
                spec: self.clone(),
                template_hash: template_hash(&self.template),
            })
        } else {
            Err(issues)
        }
    }
}

/// A Proxy spec field's path under `spec.template`.
fn template_field(field: &'static str) -> &'static str {
    match field {
        "spec.provider" => "spec.template.spec.provider",
        "spec.existing" => "spec.template.spec.existing",
        "spec.machineType" => "spec.template.spec.machineType",
        "spec.image" => "spec.template.spec.image",
        "spec.placement.host" => "spec.template.spec.placement.host",
        "spec.cloudInit.name" => "spec.template.spec.cloudInit.name",
        "spec.cloudInit.key" => "spec.template.spec.cloudInit.key",
        _ => "spec.template.spec",
    }
}

/// Whether `name` can name a pool: a DNS label (`a-z`, `0-9`, `-`, starting
/// and ending alphanumeric) of at most [`MAX_POOL_NAME`] characters.
fn is_pool_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_POOL_NAME
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// The template's hash: the first [`HASH_LEN`] hex digits of SHA-256 over
/// its JSON form (fields in declaration order, absent values omitted, maps
/// sorted), so a template that reads the same hashes the same, and adding an
/// optional field to the types does not change existing hashes.
pub fn template_hash(template: &ProxyTemplate) -> String {
    // Serializing these plain types cannot fail (string keys, no floats).
    let json = serde_json::to_vec(template).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest
        .iter()
        .take(HASH_LEN / 2)
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec() -> ProxyPoolSpec {
        serde_json::from_value(serde_json::json!({
            "template": {"spec": {"provider": "kvm2-home"}}
        }))
        .unwrap()
    }

    #[test]
    fn absent_fields_take_the_documented_defaults() {
        let s = spec();
        assert_eq!(s.replicas, 1);
        assert_eq!(s.spread.max_skew, 1);
        assert_eq!(s.strategy.max_surge, 1);
        assert_eq!(s.strategy.max_unavailable, 0);
        assert!(s.validate("egress").is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let mut s = spec();
        s.replicas = MAX_REPLICAS + 1;
        s.spread.max_skew = 0;
        s.strategy = RolloutStrategy {
            max_unavailable: 0,
            max_surge: 0,
        };
        s.template.spec.provider = "Not An Id".into();
        let issues = s.validate(&"p".repeat(MAX_POOL_NAME + 1)).unwrap_err();
        let fields: Vec<&str> = issues.iter().map(|i| i.field).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.replicas",
                "spec.spread.maxSkew",
                "spec.strategy",
                "spec.template.spec.provider"
            ]
        );
    }

    #[test]
    fn pool_names_leave_room_for_member_names() {
        assert!(is_pool_name(&"a".repeat(MAX_POOL_NAME)));
        let longest = format!("{}-{}-{}", "a".repeat(MAX_POOL_NAME), "f".repeat(8), 99_999);
        assert_eq!(longest.len(), 63);
        for bad in ["", "-a", "a-", "A", "a.b", "a_b"] {
            assert!(!is_pool_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_hash_follows_the_template_only() {
        let a = spec();
        let mut b = a.clone();
        b.replicas = 7;
        b.strategy.max_surge = 3;
        assert_eq!(template_hash(&a.template), template_hash(&b.template));
        assert_eq!(template_hash(&a.template).len(), HASH_LEN);
        b.template.spec.image = Some("debian-13".into());
        assert_ne!(template_hash(&a.template), template_hash(&b.template));
        let mut c = a.clone();
        c.template.metadata.labels.insert("team".into(), "a".into());
        assert_ne!(template_hash(&a.template), template_hash(&c.template));
        // Pinned: changing it changes every member's name.
        // `printf '{"spec":{"provider":"kvm2-home"}}' | sha256sum`
        assert_eq!(template_hash(&a.template), "fe7baede");
    }
}

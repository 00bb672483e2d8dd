//! The custom resources: `Proxy` and `ProxyPool` (namespaced) and
//! `ProviderHealth` (cluster-scoped), group [`GROUP`], version `v1alpha1`.
//!
//! The spec and status types are `fleet`'s, and so are their schemas: the
//! wire shape is decided there, where the reconcile step reads and writes
//! it, and `fleet` derives `schemars::JsonSchema` from the same serde
//! attributes and doc comments (field docs become `kubectl explain` text,
//! serde defaults become schema defaults). kube's derive turns them into
//! structural schemas (inlined, `nullable` for `Option`, enums hoisted).
//! This module adds only what is Kubernetes' own:
//!
//! - names, scope, printer columns and the status subresource (the derive);
//! - the spec's immutability rule, CEL `self == oldSelf` (`x_kube`): API
//!   servers that enforce it (≥ 1.25) refuse an edit; older ones drop the
//!   rule silently, so the operator also enforces it as the `Ready` reason
//!   `SpecImmutable`;
//! - [`crds_yaml`]: only the `format`s Kubernetes knows (schemars writes
//!   Rust's integer widths and `ip`, which the API server ignores and, since
//!   1.34, warns about), and optionally no CEL rules (`deploy/crds/`).
//!   `Proxy::crd()` alone is the derive's output before that pass: print or
//!   install the CRDs through [`crds_yaml`].
//!
//! There is no hand-written schema to keep in step with `fleet`; unit tests
//! pin what the derivation must give Kubernetes (structural rules, formats,
//! bounds, list-maps, the exact set of defaults).

use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The API group of both resources.
pub const GROUP: &str = "egress-proxies.io";
/// The finalizer the reconciler puts on every `Proxy`.
pub const FINALIZER: &str = "egress-proxies.io/instance";

/// What one `Proxy` asks for: one egress proxy VM through a provider entry.
///
/// Immutable once written (CEL rule `self == oldSelf`, and the operator's
/// `SpecImmutable` condition where CEL is not enforced).
//
// kube's derive needs a local type; serde and schemars see through this one
// (`transparent`), so the schema is `fleet::ProxySpec`'s with the CEL rule
// added. This doc comment is the `spec` description `kubectl explain` shows.
// The derive's repeated `printcolumn(type_ = ..)` trips a clippy lint.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "egress-proxies.io",
    version = "v1alpha1",
    kind = "Proxy",
    plural = "proxies",
    shortname = "px",
    namespaced,
    status = "fleet::ProxyStatus",
    doc = "An egress proxy: one VM running Squid, made and kept by a provider.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider"),
    printcolumn(name = "Host", type_ = "string", json_path = ".status.host"),
    printcolumn(name = "IP", type_ = "string", json_path = ".status.ip"),
    printcolumn(
        name = "Healthy",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Healthy\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("spec is immutable: delete and recreate the Proxy"))]
#[serde(transparent)]
pub struct ProxySpec {
    /// The spec, as `fleet` reads it.
    pub inner: fleet::ProxySpec,
}

/// A fleet of Proxies made from one template: `replicas` members (owned
/// Proxies named `<pool>-<template hash>-<index>`), spread over the
/// entry's hosts, rolled when the template changes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[kube(
    group = "egress-proxies.io",
    version = "v1alpha1",
    kind = "ProxyPool",
    plural = "proxypools",
    shortname = "pxp",
    namespaced,
    status = "fleet::pool::ProxyPoolStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    doc = "A pool of egress proxies: replicas Proxies from one template, spread over hosts, rolled on change.",
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(
        name = "Healthy",
        type_ = "integer",
        json_path = ".status.healthyReplicas"
    ),
    printcolumn(
        name = "Up-to-date",
        type_ = "integer",
        json_path = ".status.updatedReplicas"
    ),
    printcolumn(name = "Skew", type_ = "integer", json_path = ".status.skew"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(transparent)]
pub struct ProxyPoolSpec {
    /// The spec, as `fleet` reads it.
    pub inner: fleet::pool::ProxyPoolSpec,
}

/// One provider entry's health, named after the entry: written by the
/// operator's monitor; its spec only names the entry and type.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
#[kube(
    group = "egress-proxies.io",
    version = "v1alpha1",
    kind = "ProviderHealth",
    plural = "providerhealths",
    shortname = "ph",
    status = "fleet::ProviderHealthStatus",
    doc = "The health of one provider entry's targets (hosts), as the operator checks them.",
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.ready"),
    printcolumn(name = "Observed", type_ = "date", json_path = ".status.observedAt"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct ProviderHealthSpec {
    /// The provider type of the entry (`kvm2`).
    #[serde(rename = "type")]
    pub provider_type: String,
}

/// The `format` values Kubernetes validates (`JSONSchemaProps.format`),
/// and the OpenAPI number formats its own types carry. The API server
/// ignores any other format (and, since 1.34, warns about each one).
const KUBERNETES_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// The CRDs as one YAML stream (what `operator crd` prints and
/// `deploy/crds/` holds).
///
/// With `cel` false, the CEL rules (`x-kubernetes-validations`) are left
/// out: API servers before 1.25 do not know the field, and kubectl's
/// client-side validation against them refuses the whole CRD. `deploy/`
/// `deploy/crds/` holds the form with the rule (the default);
/// `deploy/crds-without-cel/` renders the other one for older servers (the
/// operator enforces immutability itself either way).
///
/// # Errors
/// When YAML serialization fails (it does not for these types).
pub fn crds_yaml(cel: bool) -> anyhow::Result<String> {
    let mut out = format!(
        "# Generated by `operator crd{}` (API group {GROUP}); do not edit.\n",
        if cel { "" } else { " --without-cel" }
    );
    for crd in crds(cel)? {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

/// The CRDs (Proxy, ProviderHealth, ProxyPool) as JSON: kube's derive over `fleet`'s schemas, with only the
/// formats Kubernetes knows, with or without the CEL rules.
fn crds(cel: bool) -> serde_json::Result<[Value; 3]> {
    let mut crds = [
        serde_json::to_value(Proxy::crd())?,
        serde_json::to_value(ProviderHealth::crd())?,
        serde_json::to_value(ProxyPool::crd())?,
    ];
    for crd in &mut crds {
        let versions = crd
            .pointer_mut("/spec/versions")
            .and_then(Value::as_array_mut);
        for version in versions.into_iter().flatten() {
            if let Some(schema) = version.pointer_mut("/schema/openAPIV3Schema") {
                known_formats_only(schema);
            }
        }
        if !cel {
            strip_cel(crd);
        }
    }
    Ok(crds)
}

/// Removes every `format` Kubernetes does not know from `schema` and the
/// schemas under it (`properties`, `items`, `additionalProperties`: the
/// only nesting these schemas have; a test checks they have no `anyOf`,
/// `oneOf`, `allOf` or `not`). The `type`, `minimum` and `maximum` beside
/// such a format (`uint16`, `ip`) already say what the API server can check.
fn known_formats_only(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let unknown = map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !KUBERNETES_FORMATS.contains(&f));
    if unknown {
        map.remove("format");
    }
    if let Some(properties) = map.get_mut("properties").and_then(Value::as_object_mut) {
        properties.values_mut().for_each(known_formats_only);
    }
    for key in ["items", "additionalProperties"] {
        if let Some(sub) = map.get_mut(key) {
            known_formats_only(sub);
        }
    }
}

/// Removes every `x-kubernetes-validations` key.
fn strip_cel(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(strip_cel);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cel),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use fleet::{ConditionStatus, ConditionType, ConditionUpdate, Phase, Reason, Timestamp};

    /// Every key of `value` (recursively, through arrays) is a property of
    /// `schema`.
    fn assert_covered(schema: &Value, value: &Value, path: &str) {
        match value {
            Value::Object(map) if schema["additionalProperties"].is_object() => {
                for (k, v) in map {
                    assert_covered(&schema["additionalProperties"], v, &format!("{path}.{k}"));
                }
            }
            Value::Object(map) => {
                let props = schema["properties"]
                    .as_object()
                    .unwrap_or_else(|| panic!("{path}: schema has no properties: {schema}"));
                for (k, v) in map {
                    let sub = props
                        .get(k)
                        .unwrap_or_else(|| panic!("{path}.{k} is not in the schema"));
                    assert_covered(sub, v, &format!("{path}.{k}"));
                }
            }
            Value::Array(items) => {
                for v in items {
                    assert_covered(&schema["items"], v, &format!("{path}[]"));
                }
            }
            _ => {}
        }
    }

    /// The CRDs as `operator crd` prints them: Proxy, ProviderHealth,
    /// ProxyPool.
    fn printed() -> [Value; 3] {
        crds(true).unwrap()
    }

    fn schema(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    }

    /// Calls `f` with the path and the object of `schema` and of every
    /// schema under it.
    fn walk(schema: &Value, path: &str, f: &mut impl FnMut(&str, &serde_json::Map<String, Value>)) {
        let map = schema
            .as_object()
            .unwrap_or_else(|| panic!("{path}: not a schema object: {schema}"));
        f(path, map);
        if let Some(props) = map.get("properties").and_then(Value::as_object) {
            for (name, sub) in props {
                walk(sub, &format!("{path}.{name}"), f);
            }
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{path}[]"), f);
        }
        if let Some(extra) = map.get("additionalProperties").filter(|v| v.is_object()) {
            walk(extra, &format!("{path}{{}}"), f);
        }
    }

    #[test]
    fn the_proxy_schema_covers_every_field_fleet_writes() {
        let spec = fleet::ProxySpec {
            provider: "kvm2-home".into(),
            existing: Some(fleet::ExistingProxy {
                address: "10.0.0.9".into(),
                port: 3128,
            }),
            machine_type: Some("small".into()),
            image: Some("debian-12".into()),
            placement: fleet::PlacementSpec {
                host: Some("host1".into()),
                policy: fleet::PlacementPolicy::Require,
            },
            cloud_init: Some(fleet::SecretRef {
                name: "ci".into(),
                key: "user-data".into(),
            }),
        };
        let mut status = fleet::ProxyStatus {
            phase: Some(Phase::Running),
            provider_id: Some("kvm2://kvm2-home/host1/ep-1".into()),
            host: Some("host1".into()),
            ip: Some("10.0.0.5".parse().unwrap()),
            port: Some(3128),
            created_at: Some(Timestamp::from_unix_seconds(1)),
            replacements: 1,
            recent_replacements: vec![Timestamp::from_unix_seconds(2)],
            observed_generation: Some(1),
            applied_spec: Some(spec.clone()),
            probed_instance: Some("kvm2://kvm2-home/host1/ep-1#1@10.0.0.5:3128".into()),
            conditions: Vec::new(),
        };
        status.set_condition(
            ConditionType::Ready,
            ConditionUpdate::new(ConditionStatus::True, Reason::Running, "ok", Some(1)),
            Timestamp::from_unix_seconds(3),
        );
        let [proxy, _, _] = printed();
        let schema = schema(&proxy);
        assert_covered(
            &schema["properties"]["spec"],
            &serde_json::to_value(&spec).unwrap(),
            "spec",
        );
        assert_covered(
            &schema["properties"]["status"],
            &serde_json::to_value(&status).unwrap(),
            "status",
        );
        let conditions = &schema["properties"]["status"]["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"][0], "type");
        assert_eq!(
            schema["properties"]["status"]["properties"]["appliedSpec"]["properties"],
            schema["properties"]["spec"]["properties"],
            "appliedSpec is the spec's schema"
        );
    }

    #[test]
    fn the_proxy_spec_carries_the_immutability_rule_and_columns() {
        let [crd, _, _] = printed();
        let spec = &schema(&crd)["properties"]["spec"];
        assert_eq!(
            spec["x-kubernetes-validations"],
            serde_json::json!([{
                "rule": "self == oldSelf",
                "message": "spec is immutable: delete and recreate the Proxy"
            }])
        );
        let columns: Vec<&str> = crd["spec"]["versions"][0]["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            columns,
            ["Phase", "Provider", "Host", "IP", "Healthy", "Age"]
        );
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["group"], GROUP);
        assert!(crd["spec"]["versions"][0]["subresources"]["status"].is_object());
    }

    #[test]
    fn the_pool_has_scale_columns_and_covers_fleet_status() {
        let [_, _, crd] = printed();
        let version = &crd["spec"]["versions"][0];
        assert_eq!(
            version["subresources"]["scale"],
            serde_json::json!({
                "specReplicasPath": ".spec.replicas",
                "statusReplicasPath": ".status.replicas",
                "labelSelectorPath": ".status.selector"
            })
        );
        assert!(version["subresources"]["status"].is_object());
        let columns: Vec<&str> = version["additionalPrinterColumns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            columns,
            ["Desired", "Current", "Healthy", "Up-to-date", "Skew", "Age"]
        );
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        let spec: fleet::pool::ProxyPoolSpec = serde_json::from_value(serde_json::json!({
            "replicas": 3,
            "template": {
                "metadata": {"labels": {"team": "a"}, "annotations": {"note": "x"}},
                "spec": {"provider": "kvm2-home", "image": "debian-12",
                         "placement": {"host": "host1", "policy": "Require"}}
            },
            "spread": {"maxSkew": 2},
            "strategy": {"maxSurge": 2, "maxUnavailable": 1}
        }))
        .unwrap();
        let pool = spec.validate("egress").unwrap();
        let hosts = [fleet::pool::HostState {
            name: "host1".into(),
            ready: true,
        }];
        let mut unpinned = pool.clone();
        unpinned.spec.template.spec.placement = fleet::PlacementSpec::default();
        let plan = unpinned.plan(&[], Some(&hosts));
        let status = fleet::pool::ProxyPoolStatus::default().observe(
            &unpinned,
            &plan,
            None,
            Some(1),
            Timestamp::from_unix_seconds(1),
        );
        assert!(!status.hosts.is_empty() && status.skew.is_some());
        let schema = schema(&crd);
        assert_covered(
            &schema["properties"]["spec"],
            &serde_json::to_value(&spec).unwrap(),
            "spec",
        );
        assert_covered(
            &schema["properties"]["status"],
            &serde_json::to_value(&status).unwrap(),
            "status",
        );
        let status_schema = &schema["properties"]["status"]["properties"];
        assert_eq!(
            status_schema["hosts"]["x-kubernetes-list-map-keys"][0],
            "name"
        );
        assert_eq!(
            schema["properties"]["spec"]["properties"]["replicas"]["maximum"].as_f64(),
            Some(f64::from(fleet::pool::MAX_REPLICAS))
        );
    }

    #[test]
    fn without_cel_nothing_else_changes() {
        let mut with = crds(true).unwrap();
        with.iter_mut().for_each(strip_cel);
        assert_eq!(with, crds(false).unwrap());
        assert!(
            !serde_json::to_string(&crds(false).unwrap())
                .unwrap()
                .contains("x-kubernetes-validations")
        );
    }

    #[test]
    fn the_provider_health_schema_covers_fleet_status() {
        let t = |reachable| {
            provider_api::TargetStatus::reachable(
                provider_api::Identifier::parse("host1").unwrap(),
                std::time::Duration::from_millis(3),
                reachable,
            )
        };
        let status = fleet::provider_health(
            &[t(Some("11.3.0".into()))],
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_750_000_000),
        );
        let [_, crd, _] = printed();
        let schema = schema(&crd);
        assert_covered(
            &schema["properties"]["status"],
            &serde_json::to_value(&status).unwrap(),
            "status",
        );
        let targets = &schema["properties"]["status"]["properties"]["targets"];
        assert_eq!(targets["x-kubernetes-list-type"], "map");
        assert_eq!(targets["x-kubernetes-list-map-keys"][0], "name");
        assert_eq!(crd["spec"]["scope"], "Cluster");
        assert_eq!(
            crd["spec"]["versions"][0]["additionalPrinterColumns"][1]["jsonPath"],
            ".status.ready"
        );
    }

    /// Kubernetes' structural-schema rules, as far as these schemas could
    /// break them: no references or definitions, no unions, one `type` per
    /// node (`nullable` rather than `[x, null]`), objects typed as objects,
    /// and no `additionalProperties: false` (pruning does that job).
    #[test]
    fn the_schemas_are_structural() {
        for crd in printed() {
            walk(schema(&crd), "", &mut |path, node| {
                for key in [
                    "$ref",
                    "$defs",
                    "definitions",
                    "anyOf",
                    "oneOf",
                    "allOf",
                    "not",
                    "const",
                ] {
                    assert!(!node.contains_key(key), "{path}: has {key}: {node:?}");
                }
                let ty = node.get("type").and_then(Value::as_str);
                assert!(ty.is_some(), "{path}: no single type: {node:?}");
                if node.contains_key("properties") {
                    assert_eq!(ty, Some("object"), "{path}");
                }
                if ty == Some("array") {
                    assert!(node.contains_key("items"), "{path}: an array without items");
                }
                assert_ne!(
                    node.get("additionalProperties"),
                    Some(&Value::Bool(false)),
                    "{path}"
                );
            });
        }
    }

    #[test]
    fn every_format_is_one_kubernetes_knows() {
        for crd in printed() {
            walk(schema(&crd), "", &mut |path, node| {
                if let Some(format) = node.get("format") {
                    let format = format.as_str().unwrap();
                    assert!(
                        KUBERNETES_FORMATS.contains(&format),
                        "{path}: format {format}"
                    );
                }
            });
        }
        let [proxy, _, _] = printed();
        let status = &schema(&proxy)["properties"]["status"]["properties"];
        assert!(
            status["ip"].get("format").is_none(),
            "schemars' `ip` is not Kubernetes'"
        );
        assert_eq!(status["createdAt"]["format"], "date-time");
        assert_eq!(status["observedGeneration"]["format"], "int64");
    }

    /// Ports are 1 to 65535 and counts are not negative, as the types say.
    #[test]
    fn integer_bounds_come_from_the_types() {
        let [proxy, health, _] = printed();
        let status = &schema(&proxy)["properties"]["status"]["properties"];
        assert_eq!(
            (
                status["port"]["minimum"].as_f64(),
                status["port"]["maximum"].as_f64()
            ),
            (Some(1.0), Some(65535.0))
        );
        assert_eq!(status["replacements"]["minimum"].as_f64(), Some(0.0));
        let health = &schema(&health)["properties"]["status"]["properties"];
        for count in ["readyTargets", "totalTargets"] {
            assert_eq!(health[count]["minimum"].as_f64(), Some(0.0), "{count}");
        }
        assert_eq!(
            health["targets"]["items"]["properties"]["latencyMs"]["minimum"].as_f64(),
            Some(0.0)
        );
    }

    /// Every default in the CRDs is a serde default of `fleet`'s types: what
    /// the operator reads when the field is absent, so the API server's
    /// defaulting never changes what it sees.
    #[test]
    fn the_defaults_are_fleets_serde_defaults() {
        let mut defaults = Vec::new();
        for crd in printed() {
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
            walk(schema(&crd), "", &mut |path, node| {
                if let Some(d) = node.get("default") {
                    defaults.push((format!("{kind}{path}"), d.clone()));
                }
            });
        }
        let expected: Vec<(String, Value)> = [
            (
                "Proxy.spec.cloudInit.key",
                serde_json::json!(fleet::DEFAULT_USER_DATA_KEY),
            ),
            ("Proxy.spec.placement.policy", serde_json::json!("Prefer")),
            (
                "Proxy.status.appliedSpec.cloudInit.key",
                serde_json::json!("user-data"),
            ),
            (
                "Proxy.status.appliedSpec.placement.policy",
                serde_json::json!("Prefer"),
            ),
            ("ProxyPool.spec.replicas", serde_json::json!(1)),
            ("ProxyPool.spec.spread", serde_json::json!({"maxSkew": 1})),
            ("ProxyPool.spec.spread.maxSkew", serde_json::json!(1)),
            (
                "ProxyPool.spec.strategy",
                serde_json::json!({"maxSurge": 1, "maxUnavailable": 0}),
            ),
            ("ProxyPool.spec.strategy.maxSurge", serde_json::json!(1)),
            (
                "ProxyPool.spec.strategy.maxUnavailable",
                serde_json::json!(0),
            ),
            (
                "ProxyPool.spec.template.spec.cloudInit.key",
                serde_json::json!("user-data"),
            ),
            (
                "ProxyPool.spec.template.spec.placement.policy",
                serde_json::json!("Prefer"),
            ),
        ]
        .into_iter()
        .map(|(p, v)| (p.to_owned(), v))
        .collect();
        assert_eq!(defaults, expected);
        let absent: fleet::ProxySpec =
            serde_json::from_str(r#"{"provider":"p","cloudInit":{"name":"s"},"placement":{}}"#)
                .unwrap();
        assert_eq!(absent.placement.policy, fleet::PlacementPolicy::Prefer);
        assert_eq!(absent.cloud_init.unwrap().key, fleet::DEFAULT_USER_DATA_KEY);
        let pool: fleet::pool::ProxyPoolSpec =
            serde_json::from_str(r#"{"template":{"spec":{"provider":"p"}}}"#).unwrap();
        assert_eq!(
            serde_json::to_value((pool.replicas, pool.spread, pool.strategy)).unwrap(),
            serde_json::json!([1, {"maxSkew": 1}, {"maxSurge": 1, "maxUnavailable": 0}])
        );
    }

    #[test]
    fn proxy_objects_read_fleet_spec_and_status() {
        let p: Proxy = serde_json::from_value(serde_json::json!({
            "apiVersion": "egress-proxies.io/v1alpha1", "kind": "Proxy",
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"provider": "kvm2-home", "cloudInit": {"name": "ci"}},
            "status": {"phase": "Running"}
        }))
        .unwrap();
        assert_eq!(p.spec.inner.provider, "kvm2-home");
        assert_eq!(p.spec.inner.cloud_init.unwrap().key, "user-data");
        assert_eq!(p.status.unwrap().phase, Some(Phase::Running));
    }
}

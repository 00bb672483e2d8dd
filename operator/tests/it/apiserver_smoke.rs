//! Smoke tests proving the sandbox's Kubernetes API server is real and does
//! what the operator relies on: listing, CRDs and custom objects with a
//! watch, optimistic concurrency (409), Leases, RBAC, TokenRequest, and
//! `kubectl apply -k`.
//!
//! They need `cargo xtask test` (or `cargo xtask sandbox up` and the
//! exported variable); without the sandbox they fail.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::Kubeconfig;
use testkit::KubeService;
use testkit::kubectl::kubectl;
use testkit::names::unique;

use crate::support::{admin, client_from, kube_service};

#[tokio::test]
async fn lists_the_system_namespaces() {
    let k = kube_service();
    let client = admin(&k).await;
    let names: Vec<String> = Api::<Namespace>::all(client)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    for expected in ["default", "kube-system", "kube-public"] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} not in {names:?}"
        );
    }
    let version = client_version(&k).await;
    assert_eq!(version, k.version);
}

async fn client_version(k: &KubeService) -> String {
    admin(k)
        .await
        .apiserver_version()
        .await
        .unwrap()
        .git_version
}

#[tokio::test]
async fn a_crd_serves_custom_objects_that_can_be_watched() {
    let k = kube_service();
    let client = admin(&k).await;
    let group = format!("{}.kvm2.test", unique("smoke"));
    let crd: CustomResourceDefinition = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widgets.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget" },
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "subresources": { "status": {} },
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": { "size": { "type": "integer" } } },
                        "status": { "type": "object", "properties": { "phase": { "type": "string" } } }
                    }
                }}
            }]
        }
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    // The API server's own apiextensions controller marks it Established.
    let established = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let got = crds.get(&format!("widgets.{group}")).await.unwrap();
            let ok = got
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if ok {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(established.is_ok(), "CRD not Established within 30 s");

    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, "v1alpha1", "Widget"));
    let widgets: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    // Discovery of a new group can lag its Established condition briefly.
    let mut watch = None;
    for _ in 0..50 {
        match widgets.watch(&WatchParams::default(), "0").await {
            Ok(w) => {
                watch = Some(w.boxed());
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let mut watch = watch.expect("watch on the new resource");
    let mut obj = DynamicObject::new("w1", &resource);
    obj.data = serde_json::json!({ "spec": { "size": 3 } });
    let created = widgets.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"]["size"], 3);

    let event = tokio::time::timeout(Duration::from_secs(10), watch.try_next())
        .await
        .expect("a watch event within 10 s")
        .unwrap()
        .expect("the watch stream is open");
    match event {
        WatchEvent::Added(o) => assert_eq!(o.metadata.name.as_deref(), Some("w1")),
        other => panic!("expected Added, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stale_resource_version_is_a_409_conflict() {
    let k = kube_service();
    let client = admin(&k).await;
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let name = unique("smoke-cm");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.clone());
    cm.data = Some([("k".to_owned(), "1".to_owned())].into());
    let first = maps.create(&PostParams::default(), &cm).await.unwrap();

    let mut newer = first.clone();
    newer.data = Some([("k".to_owned(), "2".to_owned())].into());
    maps.replace(&name, &PostParams::default(), &newer)
        .await
        .unwrap();

    // `first` still carries the old resourceVersion.
    let mut stale = first;
    stale.data = Some([("k".to_owned(), "3".to_owned())].into());
    let err = maps
        .replace(&name, &PostParams::default(), &stale)
        .await
        .unwrap_err();
    match err {
        kube::Error::Api(status) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("expected a 409, got {other:?}"),
    }
    let now = maps.get(&name).await.unwrap();
    assert_eq!(now.data.unwrap()["k"], "2");
}

#[tokio::test]
async fn a_lease_is_created_and_renewed() {
    let k = kube_service();
    let client = admin(&k).await;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let name = unique("smoke-lease");
    let mut lease = Lease::default();
    lease.metadata.name = Some(name.clone());
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some("replica-a".into());
    spec.lease_duration_seconds = Some(15);
    spec.acquire_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    spec.renew_time = spec.acquire_time.clone();
    let created = leases.create(&PostParams::default(), &lease).await.unwrap();
    let first_renew = created.spec.as_ref().unwrap().renew_time.clone().unwrap();

    tokio::time::sleep(Duration::from_millis(20)).await;
    let mut renewed = created.clone();
    let s = renewed.spec.as_mut().unwrap();
    s.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
    let after = leases
        .replace(&name, &PostParams::default(), &renewed)
        .await
        .unwrap();
    let second_renew = after.spec.unwrap().renew_time.unwrap();
    assert!(second_renew.0 > first_renew.0, "renewTime did not move");
    assert_ne!(
        after.metadata.resource_version,
        created.metadata.resource_version
    );

    // A second replica renewing from the first copy loses (409): that is
    // what makes the lease a lock.
    let err = leases
        .replace(&name, &PostParams::default(), &created)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
}

#[tokio::test]
async fn rbac_refuses_a_service_account_until_a_role_grants_it() {
    let k = kube_service();
    let ns = "default";
    let sa = unique("smoke-sa");
    kubectl(&k, &["-n", ns, "create", "serviceaccount", &sa]);
    // TokenRequest: the API server signs the token with the sandbox's key.
    let token = kubectl(&k, &["-n", ns, "create", "token", &sa]);
    let user = format!("system:serviceaccount:{ns}:{sa}");
    let kubeconfig: Kubeconfig =
        serde_json::from_str(&k.kubeconfig_with_token(&user, token.trim())).unwrap();
    let client = client_from(kubeconfig).await;
    let maps: Api<ConfigMap> = Api::namespaced(client, ns);
    let err = maps.list(&ListParams::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );

    let role = unique("smoke-role");
    kubectl(
        &k,
        &[
            "-n",
            ns,
            "create",
            "role",
            &role,
            "--verb=list",
            "--resource=configmaps",
        ],
    );
    kubectl(
        &k,
        &[
            "-n",
            ns,
            "create",
            "rolebinding",
            &role,
            &format!("--role={role}"),
            &format!("--serviceaccount={ns}:{sa}"),
        ],
    );
    // RBAC's authorizer reads from an informer: allow it a moment.
    let mut listed = false;
    for _ in 0..100 {
        if maps.list(&ListParams::default()).await.is_ok() {
            listed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed, "the RoleBinding never took effect");
    // The role grants list only.
    let err = maps.get("anything").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err:?}"
    );
}

#[tokio::test]
async fn kubectl_apply_k_applies_a_kustomization() {
    let k = kube_service();
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/testdata/smoke-kustomization"
    );
    let out = kubectl(&k, &["apply", "-k", dir]);
    assert!(out.contains("configmap/smoke-settings-"), "{out}");
    let client = admin(&k).await;
    let maps: Api<ConfigMap> = Api::namespaced(client, "kvm2-smoke-kustomize");
    let generated: Vec<ConfigMap> = maps
        .list(&ListParams::default().labels("app.kubernetes.io/part-of=kvm2-smoke"))
        .await
        .unwrap()
        .items;
    assert_eq!(generated.len(), 1);
    let cm = &generated[0];
    assert!(
        cm.metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("smoke-settings-")
    );
    assert_eq!(cm.data.as_ref().unwrap()["greeting"], "hello");
}

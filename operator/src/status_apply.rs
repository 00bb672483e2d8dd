//! [`apply_status`]: a status written by server-side apply under a field
//! manager of its own (the reconciler, the health engine and the pool
//! controller each own their part of a status).

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Applies `status` to the object `name` of `api` as `manager` (forced: a
/// writer's own fields are its alone); fields `status` leaves out that
/// `manager` set before are released.
///
/// # Errors
/// The API server's answer.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    manager: &str,
    status: &impl Serialize,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": { "name": name },
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    )
    .await
    .map(|_| ())
}

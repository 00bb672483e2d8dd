//! The create path: checks (spec, provider entry, metadata, Secret), the
//! request, and recording the instance the moment Create returns.

use provider_api::{
    CreateRequest, Error as ProviderError, Identifier, Instance, ObjectName, OwnerUid,
};

use super::draft::Draft;
use super::{Call, Next, Step, observe};
use crate::event::{Event, EventReason};
use crate::reason::Reason;
use crate::status::{ConditionType, Phase};
use crate::time::Timestamp;
use crate::user_data::{UserDataProblem, UserDataRead};

/// No instance recorded: check every input, then ask for a Create. Nothing
/// is made when any input is wrong.
pub(super) fn start(mut d: Draft<'_>) -> Step {
    let spec = d.spec();
    let valid = match spec.validate() {
        Ok(v) => v,
        Err(issues) => {
            let msg = issues
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            return d.input_error(Reason::InvalidSpec, msg);
        }
    };
    if !d.inp.providers.contains(&valid.provider) {
        let msg = format!(
            "spec.provider: no provider entry {:?} in the providers config",
            valid.provider.as_str()
        );
        return d.input_error(Reason::UnknownProvider, msg);
    }
    let meta = d.inp.meta;
    let (owner, name, namespace) = match (
        OwnerUid::parse(&meta.uid),
        ObjectName::parse(&meta.name),
        Identifier::parse(&meta.namespace),
    ) {
        (Ok(o), Ok(n), Ok(ns)) => (o, n, ns),
        (o, n, ns) => {
            let rules: Vec<String> = [
                o.err().map(|e| format!("metadata.uid {}", e.rule())),
                n.err().map(|e| format!("metadata.name {}", e.rule())),
                ns.err().map(|e| format!("metadata.namespace {}", e.rule())),
            ]
            .into_iter()
            .flatten()
            .collect();
            return d.input_error(Reason::InvalidSpec, rules.join("; "));
        }
    };
    let user_data = match (&valid.cloud_init, d.inp.user_data) {
        (None, _) => None,
        (Some(r), UserDataRead::NotRequested) => {
            let msg = format!("cloud-init Secret {:?} was not read", r.name);
            return d.transient(msg);
        }
        (Some(r), read) => match read.check(&r.name, &r.key, d.r.policy.max_user_data) {
            Ok(u) => u,
            Err(UserDataProblem::Input(reason, msg)) => return d.input_error(reason, msg),
            Err(UserDataProblem::Unavailable(msg)) => return d.transient(msg),
        },
    };

    let mut request = CreateRequest::new(owner, name, namespace);
    request.machine_type = valid.machine_type;
    request.image = valid.image;
    request.placement = valid.placement;
    request.avoid = d.memory.avoid.iter().cloned().collect();
    request.user_data = user_data;
    let tag = d.r.cluster.tag();
    request.tags.insert(tag.key, tag.value);
    // A namespace is a DNS label, always a tag value.
    if let Ok(ns) = crate::cluster::namespace_tag(&meta.namespace) {
        request.tags.insert(ns.key, ns.value);
    }

    // While retrying after provider trouble with the same spec, keep the
    // trouble visible (and the status unchanged) instead of flipping to
    // Creating and back on every retry.
    let retrying = d.status.condition(ConditionType::Ready).is_some_and(|c| {
        c.observed_generation == Some(meta.generation)
            && matches!(
                c.known_reason(),
                Some(Reason::QuotaWait | Reason::ProviderRejected | Reason::ProviderUnavailable)
            )
    });
    if !retrying {
        d.status.phase = Some(Phase::Pending);
        let msg = format!("creating an instance on provider {}", valid.provider);
        d.not_provisioned(Reason::Creating, msg);
    }
    d.finish(Next::Call(Call::Create {
        provider: valid.provider,
        request: Box::new(request),
    }))
}

/// Create answered: record the instance at once (provider ID, host,
/// creation time, applied spec), then judge its state like a Get.
pub(super) fn after(mut d: Draft<'_>, result: Result<Instance, ProviderError>) -> Step {
    match result {
        Ok(instance) => {
            d.memory.failures = 0;
            d.memory.avoid = None;
            d.status.provider_id = Some(instance.id.to_string());
            d.status.host = Some(instance.host.to_string());
            d.status.created_at = Some(instance.created_at.map_or(d.now, Timestamp::from));
            d.status.port = Some(instance.proxy_port.unwrap_or(d.r.policy.proxy_port));
            d.status.applied_spec = Some(d.spec());
            if !d.inp.meta.pool_member {
                d.events.push(Event::normal(
                    EventReason::Created,
                    format!("created instance {} on host {}", instance.id, instance.host),
                ));
            }
            observe::created(d, instance)
        }
        Err(e) => d.provider_error("create instance", &e, false),
    }
}

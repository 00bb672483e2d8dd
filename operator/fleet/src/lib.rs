//! fleet (docs to come).

mod backoff;
mod cluster;
mod error;
mod event;
mod reason;
mod reconcile;
mod replace_cap;
mod spec;
mod status;
mod time;
mod user_data;

pub use backoff::{Backoff, Jitter};
pub use cluster::{CLUSTER_TAG_KEY, ClusterIdentity};
pub use error::Error;
pub use event::{Event, EventKind, EventReason};
pub use reason::{Reason, ReasonCategory};
pub use reconcile::{
    ABANDON_ANNOTATION, AddressGrace, Call, MAX_CALLS_PER_PASS, Memory, Next, Outcome, Policy,
    ProxyMeta, Reconciler, Step, StepInput, awaits_provider_recovery,
};
pub use replace_cap::{CapVerdict, ReplaceCap};
pub use spec::{
    DEFAULT_USER_DATA_KEY, PlacementPolicy, PlacementSpec, ProxySpec, SecretRef, SpecIssue,
    ValidSpec,
};
pub use status::{Condition, ConditionStatus, ConditionType, ConditionUpdate, Phase, ProxyStatus};
pub use time::Timestamp;
pub use user_data::{UserDataProblem, UserDataRead};

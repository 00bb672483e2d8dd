//! [`Traced`]: a [`Provider`] decorator that runs every operation in a
//! `tracing` span, and forwards the [`Checker`] capability (traced as well).
//!
//! Spans are named `provider.create`, `provider.get`, `provider.delete`,
//! `provider.list_by_tag` and `provider.check`, at `INFO` level, with fields
//! `provider`, `provider_type`, the operation's key inputs (`owner_uid`,
//! `instance`, `proxy`, `machine_type`, `image`, `provider_id`, `tag`,
//! `timeout_ms`), its result where small (`provider_id` after a create,
//! `state`, `count`, `targets`, `reachable`) and, when it fails,
//! `error.class` and `error.message`. User data is never a field:
//! [`CreateRequest::user_data`] is recorded as its length only
//! (`user_data_bytes`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tracing::{Instrument, Span, field};

use crate::check::{Checker, TargetStatus};
use crate::error::Error;
use crate::ident::Identifier;
use crate::instance::{Instance, ListedInstance};
use crate::provider::Provider;
use crate::provider_id::ProviderId;
use crate::provider_type::ProviderType;
use crate::request::{CreateRequest, Tag};

/// Runs every operation of the wrapped provider in a span. Results,
/// including errors, pass through unchanged.
pub struct Traced {
    inner: Arc<dyn Provider>,
    checker: Option<TracedChecker>,
}

impl Traced {
    /// Wraps `inner`. If `inner` has a [`Checker`], so does the wrapper.
    pub fn new(inner: Arc<dyn Provider>) -> Self {
        let checker = inner.checker().is_some().then(|| TracedChecker {
            inner: inner.clone(),
        });
        Traced { inner, checker }
    }
}

/// Records the outcome of `r` on `span`.
fn record<T>(span: &Span, r: &Result<T, Error>) {
    if let Err(e) = r {
        span.record("error.class", e.class().as_str());
        span.record("error.message", e.message());
    }
}

#[async_trait]
impl Provider for Traced {
    fn name(&self) -> &Identifier {
        self.inner.name()
    }

    fn provider_type(&self) -> ProviderType {
        self.inner.provider_type()
    }

    async fn create(&self, req: &CreateRequest) -> Result<Instance, Error> {
        let span = tracing::info_span!(
            "provider.create",
            provider = %self.inner.name(),
            provider_type = %self.inner.provider_type(),
            owner_uid = %req.owner_uid,
            instance = %req.instance_name(),
            proxy = %format_args!("{}/{}", req.proxy_namespace, req.proxy_name),
            machine_type = req.machine_type.as_ref().map(Identifier::as_str),
            image = req.image.as_ref().map(Identifier::as_str),
            user_data_bytes = req.user_data.as_ref().map_or(0, |u| u.len()),
            provider_id = field::Empty,
            error.class = field::Empty,
            error.message = field::Empty,
        );
        let r = self.inner.create(req).instrument(span.clone()).await;
        if let Ok(i) = &r {
            span.record("provider_id", field::display(&i.id));
        }
        record(&span, &r);
        r
    }

    async fn get(&self, id: &ProviderId) -> Result<Instance, Error> {
        let span = tracing::info_span!(
            "provider.get",
            provider = %self.inner.name(),
            provider_type = %self.inner.provider_type(),
            provider_id = %id,
            state = field::Empty,
            error.class = field::Empty,
            error.message = field::Empty,
        );
        let r = self.inner.get(id).instrument(span.clone()).await;
        if let Ok(i) = &r {
            span.record("state", i.state.as_str());
        }
        record(&span, &r);
        r
    }

    async fn delete(&self, id: &ProviderId) -> Result<(), Error> {
        let span = tracing::info_span!(
            "provider.delete",
            provider = %self.inner.name(),
            provider_type = %self.inner.provider_type(),
            provider_id = %id,
            error.class = field::Empty,
            error.message = field::Empty,
        );
        let r = self.inner.delete(id).instrument(span.clone()).await;
        record(&span, &r);
        r
    }

    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, Error> {
        let span = tracing::info_span!(
            "provider.list_by_tag",
            provider = %self.inner.name(),
            provider_type = %self.inner.provider_type(),
            tag = %format_args!("{}={}", tag.key, tag.value),
            count = field::Empty,
            error.class = field::Empty,
            error.message = field::Empty,
        );
        let r = self.inner.list_by_tag(tag).instrument(span.clone()).await;
        if let Ok(v) = &r {
            span.record("count", v.len());
        }
        record(&span, &r);
        r
    }

    fn checker(&self) -> Option<&dyn Checker> {
        self.checker.as_ref().map(|c| c as &dyn Checker)
    }

    fn instance_events(&self) -> Option<crate::events::InstanceEvents> {
        self.inner.instance_events()
    }

    fn fills_in_flight(&self) -> Option<usize> {
        self.inner.fills_in_flight()
    }
}

/// The [`Checker`] of a [`Traced`] provider.
pub struct TracedChecker {
    inner: Arc<dyn Provider>,
}

#[async_trait]
impl Checker for TracedChecker {
    async fn check(&self, timeout: Duration) -> Vec<TargetStatus> {
        let Some(checker) = self.inner.checker() else {
            return Vec::new();
        };
        let span = tracing::info_span!(
            "provider.check",
            provider = %self.inner.name(),
            provider_type = %self.inner.provider_type(),
            timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            targets = field::Empty,
            reachable = field::Empty,
        );
        let statuses = checker.check(timeout).instrument(span.clone()).await;
        span.record("targets", statuses.len());
        span.record("reachable", statuses.iter().filter(|s| s.reachable).count());
        statuses
    }
}

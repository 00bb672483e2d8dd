//! The [`Provider`] trait: the contract every VM provider implements.

use async_trait::async_trait;

use crate::check::Checker;
use crate::error::Error;
use crate::events::InstanceEvents;
use crate::ident::Identifier;
use crate::instance::{Instance, ListedInstance};
use crate::provider_id::ProviderId;
use crate::provider_type::ProviderType;
use crate::request::{CreateRequest, Tag};

/// A VM provider: creates, reads, deletes and lists instances.
///
/// Object safe: the [`Registry`](crate::Registry) hands out
/// `Arc<dyn Provider>`. Every operation returns an [`Error`] whose
/// [class](crate::ErrorClass) alone tells the caller whether to retry;
/// `docs/provider-contract.md` states the contract of each operation in full.
///
/// Messages and spans never carry [`CreateRequest::user_data`].
#[async_trait]
pub trait Provider: Send + Sync {
    /// The config entry's name (also the `provider` part of every
    /// [`ProviderId`] this provider issues).
    fn name(&self) -> &Identifier;

    /// The provider's type.
    fn provider_type(&self) -> ProviderType;

    /// Creates the instance for `req`, or returns the existing one.
    ///
    /// Idempotent by owner: the instance name is
    /// [`name_from_uid`](crate::name_from_uid)`(req.owner_uid)`; if an
    /// instance with that name and the same owner already exists, it is
    /// returned (and started if stopped) rather than created again. An
    /// existing instance with that name but another owner, or no ownership
    /// mark, is never adopted: [`Permanent`](crate::ErrorClass::Permanent).
    /// A failed create leaves nothing behind that a retry would trip over.
    /// Usually returns [`Provisioning`](crate::InstanceState::Provisioning);
    /// the caller polls [`get`](Self::get) for the address.
    ///
    /// # Errors
    /// `Transient` (retry the same request), `Permanent` (unknown machine
    /// type or image, bad request, foreign instance: fix the input),
    /// `QuotaExceeded` (no capacity: retry later). Never `NotFound`.
    ///
    /// # Cancel safety
    /// Not atomic: cancelling may leave a partly created instance. It is
    /// owned and named by the UID, so the next `create` for that owner
    /// completes or replaces it, and `delete` removes it.
    async fn create(&self, req: &CreateRequest) -> Result<Instance, Error>;

    /// Reads the instance's state and address.
    ///
    /// # Errors
    /// `NotFound` when no instance with this ID exists (the caller may
    /// recreate it); `Transient` when it could not be read, including when
    /// every address source failed (never reported as "no address yet");
    /// `Permanent` for an ID this provider did not issue (wrong type or
    /// entry name).
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    async fn get(&self, id: &ProviderId) -> Result<Instance, Error>;

    /// Deletes the instance and everything created for it (disks, seed).
    ///
    /// Idempotent: deleting what does not exist returns `Ok(())`; a
    /// half-deleted instance is finished off. Shared resources (base
    /// images) are never deleted. An instance without our ownership mark is
    /// never deleted (`Permanent`).
    ///
    /// # Errors
    /// `Transient` (retry), `Permanent` (foreign instance, ID of another
    /// provider). Never `NotFound`.
    ///
    /// # Cancel safety
    /// Not atomic; a repeated `delete` finishes what a cancelled one began.
    async fn delete(&self, id: &ProviderId) -> Result<(), Error>;

    /// Lists every instance carrying `tag`, across all of the provider's
    /// targets, from its listing alone (no per-instance state or address
    /// reads) — the garbage collector's view.
    ///
    /// All or nothing: if any target could not be listed the call fails
    /// (`Transient`) rather than return a partial list, because the caller
    /// deletes what it does not see claimed.
    ///
    /// # Errors
    /// `Transient` when any target's listing failed.
    ///
    /// # Cancel safety
    /// Cancel safe: read-only.
    async fn list_by_tag(&self, tag: &Tag) -> Result<Vec<ListedInstance>, Error>;

    /// The provider's health-check capability, if it has one.
    ///
    /// Must return the same answer (`Some` or `None`) for the provider's
    /// whole life. Decorators forward it (wrapping the checker too), so the
    /// capability survives instrumentation.
    fn checker(&self) -> Option<&dyn Checker> {
        None
    }

    /// Starts a watch over the provider's instances
    /// ([`crate::events`]); `None` when the provider cannot tell (its
    /// callers poll). Each call starts a watch of its own; dropping it ends
    /// it. Decorators forward it.
    ///
    /// Must be called within a Tokio runtime by providers that spawn.
    fn instance_events(&self) -> Option<InstanceEvents> {
        None
    }

    /// Image fills (a base image downloaded to a host, before instances
    /// can use it) running now; `None` for a provider that makes none.
    /// Read at each metrics scrape, so it must be cheap and never block.
    /// Decorators forward it.
    fn fills_in_flight(&self) -> Option<usize> {
        None
    }
}

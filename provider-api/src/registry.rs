//! [`Registry`]: builds providers from the config through a constructor
//! table keyed by [`ProviderType`].
//!
//! Implementations register themselves from their own crates, so this crate
//! depends on none of them:
//!
//! ```
//! use std::sync::Arc;
//! use provider_api::{Error, ProviderEntry, Provider, ProviderType, Registry};
//!
//! // In the implementation's crate, e.g. `kvm2_provider::register`:
//! pub fn register(registry: &mut Registry) -> Result<(), Error> {
//!     registry.register(ProviderType::Kvm2, |entry: &ProviderEntry| -> Result<Arc<dyn Provider>, Error> {
//!         let _cfg = entry.kvm2().ok_or_else(|| Error::permanent("not a kvm2 entry"))?;
//!         Err(Error::permanent("example only"))
//!     })
//! }
//!
//! let mut registry = Registry::new();
//! register(&mut registry).unwrap();
//! assert!(registry.is_registered(ProviderType::Kvm2));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::config::{ProviderEntry, ProvidersConfig};
use crate::error::Error;
use crate::ident::Identifier;
use crate::metrics::{Metered, ProviderMetrics};
use crate::provider::Provider;
use crate::provider_type::ProviderType;
use crate::traced::Traced;

/// Builds one provider from its validated config entry.
///
/// Contract: it must not dial or block (connections are made lazily, on
/// first use, so a host that is down at start-up does not stop the
/// operator); the provider it returns reports `entry.name` from
/// [`Provider::name`] and the entry's type from
/// [`Provider::provider_type`]. It returns
/// [`Permanent`](crate::ErrorClass::Permanent) for an entry it cannot use.
pub type Constructor =
    Arc<dyn Fn(&ProviderEntry) -> Result<Arc<dyn Provider>, Error> + Send + Sync>;

/// The constructor table.
#[derive(Default, Clone)]
pub struct Registry {
    constructors: BTreeMap<ProviderType, Constructor>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("types", &self.constructors.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the constructor for `provider_type`.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when the type already has
    /// one (registering twice is a wiring bug, not something to override
    /// silently).
    pub fn register<F>(&mut self, provider_type: ProviderType, constructor: F) -> Result<(), Error>
    where
        F: Fn(&ProviderEntry) -> Result<Arc<dyn Provider>, Error> + Send + Sync + 'static,
    {
        if self.constructors.contains_key(&provider_type) {
            return Err(Error::permanent(format!(
                "a constructor for provider type {provider_type} is already registered"
            )));
        }
        self.constructors
            .insert(provider_type, Arc::new(constructor));
        Ok(())
    }

    /// Whether `provider_type` has a constructor.
    pub fn is_registered(&self, provider_type: ProviderType) -> bool {
        self.constructors.contains_key(&provider_type)
    }

    /// Builds every entry of `config`, in file order.
    ///
    /// All or nothing: the first entry that cannot be built fails the whole
    /// build, with the entry named in the message.
    ///
    /// # Errors
    /// [`Permanent`](crate::ErrorClass::Permanent) when an entry's type has
    /// no constructor or the provider built breaks the constructor contract
    /// (wrong name or type); a constructor's own error, with its class kept
    /// and the entry named as context.
    pub fn build(&self, config: &ProvidersConfig) -> Result<Providers, Error> {
        let mut out = Providers::default();
        for (i, entry) in config.providers.iter().enumerate() {
            let ty = entry.provider_type();
            let what = format!("providers[{i}] ({})", entry.name);
            let ctor = self.constructors.get(&ty).ok_or_else(|| {
                Error::permanent(format!(
                    "{what}: no constructor registered for provider type {ty}"
                ))
            })?;
            let provider = ctor(entry).map_err(|e| e.context(format!("build {what}")))?;
            if provider.name() != &entry.name || provider.provider_type() != ty {
                return Err(Error::permanent(format!(
                    "{what}: constructor returned provider {} of type {}",
                    provider.name(),
                    provider.provider_type()
                )));
            }
            if out.by_name.insert(entry.name.clone(), provider).is_some() {
                // Unreachable for a validated config (names are unique).
                return Err(Error::permanent(format!("{what}: duplicate provider name")));
            }
            out.order.push(entry.name.clone());
        }
        Ok(out)
    }
}

/// The providers built from a config, by name, in config order.
#[derive(Default, Clone)]
pub struct Providers {
    by_name: BTreeMap<Identifier, Arc<dyn Provider>>,
    order: Vec<Identifier>,
}

impl fmt::Debug for Providers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.order.iter()).finish()
    }
}

impl Providers {
    /// The provider named `name`.
    pub fn get(&self, name: &Identifier) -> Option<&Arc<dyn Provider>> {
        self.by_name.get(name)
    }

    /// Every provider, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.order.iter().filter_map(|n| self.by_name.get(n))
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Wraps every provider in [`Metered`] (recording into `metrics`) and
    /// then [`Traced`]: the form the operator uses. The
    /// [`checker`](Provider::checker) capability survives both layers.
    pub fn instrumented(self, metrics: &ProviderMetrics) -> Self {
        let by_name = self
            .by_name
            .into_iter()
            .map(|(name, p)| {
                let metered: Arc<dyn Provider> = Arc::new(Metered::new(p, metrics.clone()));
                let traced: Arc<dyn Provider> = Arc::new(Traced::new(metered));
                (name, traced)
            })
            .collect();
        Providers {
            by_name,
            order: self.order,
        }
    }
}

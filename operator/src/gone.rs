//! An object gone while the operator worked on it: a routine race (a Proxy
//! deleted between its watch event and our write, a reconcile queued for
//! an object the cache has dropped), logged at debug, never as a warning.

use std::fmt::Debug;

use kube::runtime::controller;
use provider_api::error::chain;

/// Whether the API server answered that the object does not exist.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Logs an error of a controller's stream other than a reconcile's own
/// (the error policy logs those): an object no longer in the cache at
/// debug, anything else as a warning naming `controller`.
pub fn log_controller_error<E: std::error::Error + 'static, Q: std::error::Error + 'static>(
    controller: &'static str,
    e: controller::Error<E, Q>,
) where
    controller::Error<E, Q>: Debug,
{
    match e {
        controller::Error::ReconcilerFailed(_, _) => {}
        controller::Error::ObjectNotFound(obj) => {
            tracing::debug!(object = %obj, controller, "queued object already gone");
        }
        e => tracing::warn!(error = %chain(&e), controller, "controller"),
    }
}

/// An API error answered with `code` (tests).
#[cfg(test)]
pub fn api_error(code: u16) -> kube::Error {
    kube::Error::Api(
        kube::core::Status::failure("x", "Y")
            .with_code(code)
            .boxed(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        api_error(code)
    }

    #[test]
    fn only_a_404_is_not_found() {
        assert!(is_not_found(&api(404)));
        assert!(!is_not_found(&api(409)));
        assert!(!is_not_found(&api(500)));
    }
}

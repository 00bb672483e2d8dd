//! Delete (work in progress).

use provider_api::{Error as ApiError, ProviderId};

use crate::provider::Inner;

pub(crate) async fn delete(inner: &Inner, id: &ProviderId) -> Result<(), ApiError> {
    let _ = (inner, id);
    Err(ApiError::permanent(
        "kvm2 provider: delete is not implemented yet",
    ))
}

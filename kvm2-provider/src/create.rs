//! Create (work in progress).

use provider_api::{CreateRequest, Error as ApiError, Instance};

use crate::provider::Inner;

pub(crate) async fn create(inner: &Inner, req: &CreateRequest) -> Result<Instance, ApiError> {
    let _ = (inner, req);
    Err(ApiError::permanent(
        "kvm2 provider: create is not implemented yet",
    ))
}

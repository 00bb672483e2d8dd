//! The API server's answers as provider error classes.

use provider_api::{Error, ErrorClass};

/// `e` (from the call described by `what`) with the class that tells the
/// caller whether to retry:
///
/// | answer | class |
/// |---|---|
/// | 404 | `NotFound` |
/// | 403 naming an exceeded quota | `QuotaExceeded` |
/// | 400, 401, 403, 405, 422 | `Permanent` (fix the config, the RBAC or the request) |
/// | 409, 429, 5xx, no answer (connect, TLS, timeout) | `Transient` |
pub fn classify(what: &str, e: kube::Error) -> Error {
    let class = match &e {
        kube::Error::Api(status) => match status.code {
            404 => ErrorClass::NotFound,
            403 if status.message.contains("exceeded quota") => ErrorClass::QuotaExceeded,
            400 | 401 | 403 | 405 | 422 => ErrorClass::Permanent,
            _ => ErrorClass::Transient,
        },
        kube::Error::BuildRequest(_) | kube::Error::HttpError(_) => ErrorClass::Permanent,
        _ => ErrorClass::Transient,
    };
    Error::wrap(class, what.to_owned(), e)
}

/// Whether `e` is the API server's `409 AlreadyExists`/`Conflict`.
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// Whether `e` is the API server's `404`.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16, message: &str) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": code, "message": message, "reason": "x"
        }))
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    #[test]
    fn classes() {
        let table = [
            (404, "pods \"x\" not found", ErrorClass::NotFound),
            (
                403,
                "pods \"x\" is forbidden: exceeded quota: q, requested: pods=1",
                ErrorClass::QuotaExceeded,
            ),
            (
                403,
                "pods is forbidden: User cannot create",
                ErrorClass::Permanent,
            ),
            (422, "Pod \"x\" is invalid", ErrorClass::Permanent),
            (409, "already exists", ErrorClass::Transient),
            (429, "too many requests", ErrorClass::Transient),
            (503, "unavailable", ErrorClass::Transient),
        ];
        for (code, message, class) in table {
            assert_eq!(
                classify("create Pod", api(code, message)).class(),
                class,
                "{code}"
            );
        }
        assert!(is_conflict(&api(409, "")));
        assert!(is_not_found(&api(404, "")));
        assert!(!is_not_found(&api(409, "")));
    }
}

//! Kubeconfig files for the sandbox's API server, written as JSON (a subset
//! of YAML that kubectl and kube-rs read), so no value can break the syntax.

use std::path::Path;

/// How a kubeconfig's user authenticates.
pub enum Credentials<'a> {
    /// A client certificate and its key (PEM files).
    ClientCert {
        /// The certificate.
        cert: &'a Path,
        /// Its private key.
        key: &'a Path,
    },
    /// A bearer token.
    Token(&'a str),
}

/// A kubeconfig with one cluster, one user and one current context.
pub fn render(server: &str, ca: &Path, user: &str, credentials: Credentials<'_>) -> String {
    let user_entry = match credentials {
        Credentials::ClientCert { cert, key } => serde_json::json!({
            "client-certificate": cert,
            "client-key": key,
        }),
        Credentials::Token(token) => serde_json::json!({ "token": token }),
    };
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kvm2-sandbox",
            "cluster": { "server": server, "certificate-authority": ca },
        }],
        "users": [{ "name": user, "user": user_entry }],
        "contexts": [{
            "name": "kvm2-sandbox",
            "context": { "cluster": "kvm2-sandbox", "user": user },
        }],
        "current-context": "kvm2-sandbox",
        "preferences": {},
    });
    // Serialising a `Value` built above cannot fail; fall back to an empty
    // document rather than panic.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_kubeconfig_is_valid_json_with_one_context() {
        let text = render(
            "https://127.0.0.1:6443",
            Path::new("/s/ca.crt"),
            "system:serviceaccount:ns:op",
            Credentials::Token("a\"b"),
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["users"][0]["user"]["token"], "a\"b");
        assert_eq!(
            v["clusters"][0]["cluster"]["certificate-authority"],
            "/s/ca.crt"
        );
        assert_eq!(v["current-context"], "kvm2-sandbox");
    }
}

//! The egress-proxies operator: watches `Proxy` resources and keeps one proxy
//! VM per resource through the configured providers.
//!
//! Today this binary only reports that the operator is not built yet; later
//! issues grow it into a kube-rs controller composing `provider-api` and the
//! registered providers.

fn main() {
    eprintln!("egress-proxies operator: not implemented yet (see README.md)");
    std::process::exit(2);
}

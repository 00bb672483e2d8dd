//! The operator's integration tests, one binary: a module per subject
//! (the API server itself, the CRDs, the operator binary against the API
//! server and kvm2). `tests/instant_provider.rs` is a binary of its own: it
//! has its own `main` and re-runs itself as the operator.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod alert_rules;
mod apiserver_smoke;
#[path = "../support/consumer.rs"]
mod consumer;
mod crds;
mod http_auth;
#[path = "../support/operator_account.rs"]
mod operator_account;
mod operator_apiserver;
mod otlp_receiver;
mod samples;
mod support;

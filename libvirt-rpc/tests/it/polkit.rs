//! polkit authentication against a real libvirtd configured as stock
//! distribution hosts are (`auth_unix_rw = "polkit"`): a private daemon
//! with its own D-Bus system bus and polkitd, whose rules allow user
//! `nobody` and deny everyone else. The client connects as those users
//! (libvirtd lets root in without polkit).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use crate::support;
use libvirt_rpc::{AuthType, Error, ErrorCode};
use testkit::libvirtd::PrivateLibvirtd;

const RULES: &str = r#"polkit.addRule(function(action, subject) {
    if (action.id.indexOf("org.libvirt.unix.") == 0) {
        return subject.user == "nobody" ? polkit.Result.YES : polkit.Result.NO;
    }
});"#;

const NOBODY: u32 = 65534;
/// User `daemon`, which no rule allows (libvirtd needs a user record for
/// the peer's uid, so it must be a real user).
const STRANGER: u32 = 1;

#[tokio::test]
async fn polkit_allowed_user_connects_and_calls() {
    let daemon = PrivateLibvirtd::start_polkit(RULES);
    let c = support::connect_as(&daemon, NOBODY, "test:///default")
        .await
        .unwrap_or_else(|e| panic!("{e:?}\n{}", daemon.log()));
    support::assert_lists_test_domain(&c).await;
    c.close().await;
}

#[tokio::test]
async fn polkit_refused_user_gets_auth_refused() {
    let daemon = PrivateLibvirtd::start_polkit(RULES);
    let e = support::connect_as(&daemon, STRANGER, "test:///default")
        .await
        .unwrap_err();
    match &e {
        Error::AuthRefused { method, reason } => {
            assert_eq!(*method, AuthType::Polkit);
            assert_eq!(reason.code, ErrorCode::AuthFailed, "{reason:?}");
            eprintln!("daemon's refusal: {reason:?}");
        }
        other => panic!("{other:?}"),
    }
}

//! The authentication step of the handshake: which of the daemon's offered
//! schemes to use, and running it.
//!
//! libvirtd answers `AUTH_LIST` with the schemes of the socket or port the
//! client came in on: NONE for root on the unix socket (libvirtd skips
//! polkit for uid 0) and for `auth_tcp = "none"`, POLKIT for other local
//! users on stock Fedora/RHEL/openSUSE/Debian hosts, SASL where configured.
//! With polkit the daemon decides from the peer's uid and pid (its
//! `SO_PEERCRED`); the client only makes the call. SASL is not implemented.

use crate::client::Client;
use crate::error::{Error, Result};

/// An authentication scheme of libvirt's `remote_auth_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AuthType {
    /// `REMOTE_AUTH_NONE` (0): no authentication step.
    None,
    /// `REMOTE_AUTH_SASL` (1): not implemented by this crate.
    Sasl,
    /// `REMOTE_AUTH_POLKIT` (2): the daemon asks polkit about the peer
    /// process; supported.
    Polkit,
    /// A number this crate does not know.
    Other(i32),
}

impl AuthType {
    /// The scheme for a wire value.
    pub fn from_i32(v: i32) -> Self {
        match v {
            0 => Self::None,
            1 => Self::Sasl,
            2 => Self::Polkit,
            v => Self::Other(v),
        }
    }

    /// The wire value.
    pub fn to_i32(self) -> i32 {
        match self {
            Self::None => 0,
            Self::Sasl => 1,
            Self::Polkit => 2,
            Self::Other(v) => v,
        }
    }
}

/// What the client does with the daemon's offer: NONE when offered (or
/// nothing at all is offered, as old daemons do), else polkit when
/// offered, else nothing it can do.
pub(crate) fn choose(offered: &[i32]) -> Option<AuthType> {
    let offered = || offered.iter().map(|&v| AuthType::from_i32(v));
    if offered().len() == 0 || offered().any(|a| a == AuthType::None) {
        Some(AuthType::None)
    } else if offered().any(|a| a == AuthType::Polkit) {
        Some(AuthType::Polkit)
    } else {
        None
    }
}

/// Runs the auth step on a fresh connection.
pub(crate) async fn authenticate(client: &Client) -> Result<()> {
    let offered = client.auth_list().await?;
    match choose(&offered) {
        Some(AuthType::Polkit) => match client.auth_polkit().await {
            Ok(_complete) => Ok(()),
            Err(Error::Libvirt(reason)) => Err(Error::AuthRefused {
                method: AuthType::Polkit,
                reason,
            }),
            Err(e) => Err(e),
        },
        Some(_) => Ok(()),
        None => Err(Error::UnsupportedAuth { offered }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_wins_then_polkit_then_nothing() {
        assert_eq!(choose(&[]), Some(AuthType::None));
        assert_eq!(choose(&[2, 0]), Some(AuthType::None));
        assert_eq!(choose(&[2]), Some(AuthType::Polkit));
        assert_eq!(choose(&[1, 2]), Some(AuthType::Polkit));
        assert_eq!(choose(&[1]), None);
        assert_eq!(choose(&[7]), None);
        for v in [0, 1, 2, 7, -1] {
            assert_eq!(AuthType::from_i32(v).to_i32(), v);
        }
    }
}

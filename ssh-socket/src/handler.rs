//! The russh client handler: host key verification, and the signal that the
//! session task has ended (however it ends).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use russh::client::{DisconnectReason, Handler};
use russh::keys::PublicKeyOrCertificate;

use crate::error::Error;
use crate::known_hosts::{self, CertVerdict, Verdict};
use crate::link::{Link, Reason};

/// What the handler checks host keys against.
#[derive(Debug)]
pub(crate) enum HostCheck {
    /// A known_hosts file, read before the dial (`None`: it does not exist).
    KnownHosts {
        path: PathBuf,
        text: Option<String>,
        host_entry: String,
        /// The name dialled (what a host certificate's principal must be).
        host: String,
    },
    /// Accept anything (the warning was logged by the dial).
    Insecure,
}

/// Where the handler leaves a host key refusal for the dial to report.
pub(crate) type Refusal = Arc<Mutex<Option<Error>>>;

/// The handler russh's session task owns. Dropping it (the session task
/// ended, whatever the cause) marks the link dead.
#[derive(Debug)]
pub(crate) struct ClientHandler {
    link: Arc<Link>,
    host_check: HostCheck,
    refusal: Refusal,
}

impl ClientHandler {
    pub(crate) fn new(link: Arc<Link>, host_check: HostCheck, refusal: Refusal) -> Self {
        Self {
            link,
            host_check,
            refusal,
        }
    }

    /// The known_hosts text and the name the host is listed under, when
    /// the dial checks host keys against a file that exists.
    pub(crate) fn known_hosts(&self) -> Option<(&str, &str)> {
        match &self.host_check {
            HostCheck::KnownHosts {
                text: Some(text),
                host_entry,
                ..
            } => Some((text, host_entry)),
            _ => None,
        }
    }

    fn refuse(&self, error: Error) -> Result<bool, russh::Error> {
        tracing::warn!(error = %error, "refusing SSH host key");
        *self.refusal.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
        Ok(false)
    }
}

impl Handler for ClientHandler {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let HostCheck::KnownHosts {
            path,
            text,
            host_entry,
            host,
        } = &self.host_check
        else {
            return Ok(true);
        };
        let key = match server_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => key,
            // Offered only when an `@cert-authority` line names the host.
            PublicKeyOrCertificate::Certificate(cert) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let text = text.as_deref().unwrap_or_default();
                return match known_hosts::verify_certificate(text, host_entry, host, cert, now) {
                    CertVerdict::Trusted => Ok(true),
                    CertVerdict::Refused(reason) => self.refuse(Error::HostCertificateRejected {
                        host_entry: host_entry.clone(),
                        known_hosts: path.clone(),
                        reason,
                    }),
                };
            }
        };
        let fingerprint = known_hosts::fingerprint(key);
        let algorithm = key.algorithm().to_string();
        let Some(text) = text else {
            return self.refuse(Error::HostKeyUnknown {
                host_entry: host_entry.clone(),
                algorithm,
                fingerprint,
                known_hosts: path.clone(),
                note: " (the file does not exist)".to_owned(),
            });
        };
        let error = match known_hosts::verify(text, host_entry, key) {
            Verdict::Trusted => return Ok(true),
            Verdict::Unknown { other_algorithms } => Error::HostKeyUnknown {
                host_entry: host_entry.clone(),
                algorithm,
                fingerprint,
                known_hosts: path.clone(),
                note: if other_algorithms > 0 {
                    format!(" (keys of {other_algorithms} other type(s) are listed)")
                } else {
                    String::new()
                },
            },
            Verdict::Changed { line } => Error::HostKeyChanged {
                host_entry: host_entry.clone(),
                algorithm,
                fingerprint,
                known_hosts: path.clone(),
                line,
            },
            Verdict::Revoked { line } => Error::HostKeyRevoked {
                host_entry: host_entry.clone(),
                fingerprint,
                known_hosts: path.clone(),
                line,
            },
            Verdict::CertAuthorityOnly { line } => Error::HostKeyNotCertified {
                host_entry: host_entry.clone(),
                known_hosts: path.clone(),
                line,
            },
        };
        self.refuse(error)
    }

    async fn disconnected(
        &mut self,
        reason: DisconnectReason<Self::Error>,
    ) -> Result<(), Self::Error> {
        match reason {
            DisconnectReason::ReceivedDisconnect(info) => {
                self.link.set_session_detail(format!(
                    "server disconnected ({:?}): {}",
                    info.reason_code, info.message
                ));
                Ok(())
            }
            DisconnectReason::Error(e) => {
                self.link.set_session_detail(e.to_string());
                Err(e)
            }
        }
    }
}

impl Drop for ClientHandler {
    fn drop(&mut self) {
        self.link.fail(Reason::SessionEnded);
        self.link.session_ended_token().cancel();
    }
}

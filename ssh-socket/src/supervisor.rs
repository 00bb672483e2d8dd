//! The one task per connection that owns its teardown: it watches for
//! silence, and once the link is dead it ends the SSH session and the TCP
//! connection within a fixed bound, whatever russh is blocked on.

use std::sync::Arc;
use std::time::Duration;

use russh::Disconnect;
use russh::client::Handle;

use crate::handler::ClientHandler;
use crate::link::{Link, Reason};
use crate::tcp::{KillSwitch, LastReceive};

/// The longest a polite SSH disconnect may take before the TCP connection
/// is reset anyway.
pub(crate) const POLITE_DISCONNECT: Duration = Duration::from_millis(250);

/// What the supervisor owns.
pub(crate) struct Supervisor {
    pub(crate) link: Arc<Link>,
    pub(crate) handle: Handle<ClientHandler>,
    /// The jump hosts' sessions the link runs through (outermost first):
    /// kept alive with it, ended by the same TCP reset.
    pub(crate) jumps: Vec<Handle<ClientHandler>>,
    pub(crate) kill: KillSwitch,
    pub(crate) last_receive: Arc<LastReceive>,
    pub(crate) dead_after: Duration,
}

impl Supervisor {
    /// Runs until the connection is torn down. Spawned by the dial; ended
    /// by the link's death, which every path out of a socket causes.
    pub(crate) async fn run(self) {
        let Self {
            link,
            handle,
            jumps,
            mut kill,
            last_receive,
            dead_after,
        } = self;
        tokio::select! {
            () = link.dead_token().cancelled() => {}
            silent_for = watchdog(&last_receive, dead_after) => {
                tracing::warn!(?silent_for, "SSH peer silent: declaring the link dead");
                link.fail(Reason::PeerSilent(silent_for));
            }
        }
        let session_ended = link.session_ended_token().clone();
        let polite = matches!(link.reason(), Some(Reason::Closed)) && !session_ended.is_cancelled();
        let ended_politely = polite
            && tokio::time::timeout(POLITE_DISCONNECT, async {
                // Queued behind whatever russh is doing; bounded by the
                // timeout, never awaited without it.
                let _ = handle
                    .disconnect(Disconnect::ByApplication, "closed", "")
                    .await;
                session_ended.cancelled().await;
            })
            .await
            .is_ok();
        if ended_politely {
            kill.close_gracefully(POLITE_DISCONNECT).await;
        } else {
            // Wakes russh's session task whatever it is blocked on.
            kill.kill();
            let _ = tokio::time::timeout(POLITE_DISCONNECT, session_ended.cancelled()).await;
        }
        drop(handle);
        drop(jumps);
        link.torn_down_token().cancel();
    }
}

/// Returns once nothing has been received for `dead_after`.
async fn watchdog(last_receive: &LastReceive, dead_after: Duration) -> Duration {
    loop {
        let silence = last_receive.silence();
        if silence >= dead_after {
            return silence;
        }
        tokio::time::sleep(dead_after.saturating_sub(silence) + Duration::from_millis(10)).await;
    }
}

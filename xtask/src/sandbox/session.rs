//! A sandbox for the length of one command: started unless one was already
//! up, stopped at the end unless it was up before or the caller keeps it.
//! Every subcommand that needs the sandbox (test, bench, demo, integration)
//! holds one of these instead of deciding up and down itself.

use std::path::{Path, PathBuf};

use anyhow::Result;
use sandbox_kit::Descriptor;

/// The sandbox a command runs against; see [`Session::start`].
#[must_use = "dropping the session stops the sandbox it started"]
pub struct Session {
    descriptor: PathBuf,
    /// This session started the sandbox and must stop it.
    owned: bool,
    keep: bool,
}

impl Session {
    /// Installs what is missing, then uses the running sandbox or starts
    /// one. With `keep`, a sandbox this session starts is left running.
    ///
    /// # Errors
    /// When setup or the start fails (what did start is stopped again).
    pub fn start(keep: bool) -> Result<Session> {
        if crate::setup::needed() {
            eprintln!("xtask: installing what is missing first (cargo xtask setup)");
            crate::setup::setup()?;
        }
        Ok(match super::current() {
            Some(descriptor) => Session {
                descriptor,
                owned: false,
                keep,
            },
            None => {
                eprintln!("xtask: starting the sandbox (first time: builds the guest image)");
                Session {
                    descriptor: super::up(super::hosts::DEFAULT_HOSTS)?,
                    owned: true,
                    keep,
                }
            }
        })
    }

    /// Whether [`Session::finish`] stops the sandbox (this session started
    /// it and does not keep it).
    pub fn stops_sandbox(&self) -> bool {
        self.owned && !self.keep
    }

    /// The descriptor file's path (for a child's [`sandbox_kit::ENV_VAR`]).
    pub fn path(&self) -> &Path {
        &self.descriptor
    }

    /// The descriptor, read from its file.
    ///
    /// # Errors
    /// When the file cannot be read or parsed.
    pub fn descriptor(&self) -> Result<Descriptor> {
        Ok(Descriptor::load(&self.descriptor)?)
    }

    /// Ends the session: stops the sandbox if this session started it and
    /// was not asked to keep it, and says why it stays otherwise.
    ///
    /// # Errors
    /// When stopping fails.
    pub fn finish(mut self) -> Result<()> {
        self.end()
    }

    fn end(&mut self) -> Result<()> {
        let (owned, keep) = (self.owned, self.keep);
        // Whatever happens below, the sandbox is not stopped twice.
        self.owned = false;
        match (owned, keep) {
            (true, false) => super::down(),
            (true, true) => {
                eprintln!(
                    "xtask: leaving the sandbox up (--keep); `cargo xtask sandbox down` stops it"
                );
                Ok(())
            }
            (false, _) => {
                eprintln!("xtask: the sandbox was up before; leaving it up");
                Ok(())
            }
        }
    }
}

impl Drop for Session {
    /// A session left by an error path still stops what it started.
    fn drop(&mut self) {
        if self.owned
            && let Err(e) = self.end()
        {
            eprintln!("xtask: stopping the sandbox failed: {e:#}");
        }
    }
}

//! What every subcommand shares, one job per file: running commands
//! ([`command`]), managing the processes it starts ([`process`]), and where
//! things are ([`paths`]).

pub mod command;
pub mod paths;
pub mod process;

pub use command::{argv, cmd, output, read, run, sha256_file, status};
pub use paths::{CACHE, workspace};
pub use process::{READY_BUDGET, alive, stop, wait_pid_file, wait_until_within};

/// A port on 127.0.0.1 nothing listens on right now (the one helper,
/// shared with the tests through sandbox-kit).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(sandbox_kit::free_port()?)
}

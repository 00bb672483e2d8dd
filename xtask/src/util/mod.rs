//! What every subcommand shares, one job per file: running commands
//! ([`command`]), managing the processes it starts ([`process`]), and where
//! things are ([`paths`]).

pub mod command;
pub mod paths;
pub mod process;

pub use command::{argv, cmd, output, read, run, sha256_file, status};
pub use paths::{CACHE, workspace};
pub use process::{READY_BUDGET, alive, free_port, stop, wait_pid_file, wait_until_within};

//! Running external commands: printed before they run, errors that name them.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, ExitStatus, Output, Stdio};

use anyhow::{Context, Result, bail};

/// Builds a command from a program and arguments.
pub fn cmd<I, S>(program: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(program);
    c.args(args);
    c
}

fn describe(c: &Command) -> String {
    let mut s = c.get_program().to_string_lossy().into_owned();
    for a in c.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// The command's program and arguments, as a list (what can start it again).
pub fn argv(c: &Command) -> Vec<String> {
    std::iter::once(c.get_program())
        .chain(c.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Runs a command with inherited stdio, printing it first; fails on non-zero exit.
pub fn run(mut c: Command) -> Result<()> {
    let status = status(&mut c)?;
    if !status.success() {
        bail!("`{}` failed: {status}", describe(&c));
    }
    Ok(())
}

/// Runs a command with inherited stdio, printing it first; returns its status.
pub fn status(c: &mut Command) -> Result<ExitStatus> {
    eprintln!("$ {}", describe(c));
    c.status()
        .with_context(|| format!("cannot run `{}`", describe(c)))
}

/// Runs a command quietly and returns its output, whatever its exit status.
pub fn output(mut c: Command) -> Result<Output> {
    c.stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run `{}`", describe(&c)))
}

/// Runs a command quietly; returns stdout on success, or an error carrying stderr.
pub fn read(c: Command) -> Result<String> {
    let what = describe(&c);
    let out = output(c)?;
    if !out.status.success() {
        bail!(
            "`{what}` failed: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `sha256sum` (native speed; xtask's debug build hashes slowly).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut c = cmd("sha256sum", ["--"]);
    c.arg(path);
    let out = read(c)?;
    out.split_whitespace()
        .next()
        .filter(|h| h.len() == 64)
        .map(str::to_owned)
        .with_context(|| format!("unexpected sha256sum output: {out:?}"))
}

//! Running a command-line tool from a test or benchmark: its standard
//! output, or the test fails with what the tool said on standard error.

use std::process::Command;

/// Runs `command` to its end and returns its standard output; panics with
/// the program's name and its standard error when it fails or cannot start.
pub fn stdout(command: &mut Command) -> String {
    let program = command.get_program().to_string_lossy().into_owned();
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{program} does not start: {e}"));
    assert!(
        out.status.success(),
        "{program} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_standard_output() {
        assert_eq!(stdout(Command::new("echo").arg("hi")), "hi\n");
    }

    #[test]
    #[should_panic(expected = "sh failed (exit status: 3): said so")]
    fn a_failure_carries_standard_error() {
        stdout(Command::new("sh").args(["-c", "echo said so >&2; exit 3"]));
    }
}

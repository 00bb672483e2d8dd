//! The validation table `cargo xtask demo` ends with: one row per claim of
//! the Go original's validation table, the value measured and pass/fail.

use std::fmt::Write as _;

/// One row: what is claimed, what was measured, whether it held.
#[derive(Debug, Clone)]
pub struct Row {
    /// The claim.
    pub check: String,
    /// What was measured.
    pub measured: String,
    /// Whether the claim held.
    pub pass: bool,
}

/// The table, filled as the demo goes.
#[derive(Debug, Default)]
pub struct Report {
    rows: Vec<Row>,
}

impl Report {
    /// Records a row and prints it at once (the table is printed again at
    /// the end).
    pub fn row(&mut self, check: &str, pass: bool, measured: impl Into<String>) {
        let row = Row {
            check: check.to_owned(),
            measured: measured.into(),
            pass,
        };
        println!(
            "demo: [{}] {}: {}",
            verdict(row.pass),
            row.check,
            row.measured
        );
        self.rows.push(row);
    }

    /// Whether every row passed (and there is at least one).
    pub fn passed(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.pass)
    }

    /// The table as text.
    pub fn render(&self) -> String {
        let width = self
            .rows
            .iter()
            .map(|r| r.check.chars().count())
            .max()
            .unwrap_or(5)
            .max(5);
        let mut out = String::new();
        let _ = writeln!(out, "{:<4}  {:<width$}  MEASURED", "", "CHECK");
        for r in &self.rows {
            let _ = writeln!(
                out,
                "{:<4}  {:<width$}  {}",
                verdict(r.pass),
                r.check,
                r.measured
            );
        }
        let passed = self.rows.iter().filter(|r| r.pass).count();
        let _ = writeln!(out, "{passed}/{} rows passed", self.rows.len());
        out
    }
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "FAIL" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_row_fails_the_table_and_is_shown() {
        let mut r = Report::default();
        assert!(!r.passed(), "an empty table proves nothing");
        r.row("first", true, "1");
        assert!(r.passed());
        r.row("a longer check", false, "2");
        assert!(!r.passed());
        let text = r.render();
        assert!(text.contains("FAIL  a longer check  2"), "{text}");
        assert!(text.contains("PASS  first           1"), "{text}");
        assert!(text.ends_with("1/2 rows passed\n"), "{text}");
    }
}

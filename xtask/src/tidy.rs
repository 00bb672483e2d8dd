//! Checks that keep the docs and the layout true (rust-analyzer's `tidy`):
//! every invariant a file cites is defined in ARCHITECTURE.md, no file uses
//! an undefined `H<digit>` label, and libvirt-rpc's sans-IO core
//! (`src/proto/`) never imports tokio. Each rule names the file and line
//! that breaks it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::util::{cmd, read, workspace};

/// Tracked `.rs` and `.md` files: (path relative to the workspace, text).
fn sources() -> Vec<(String, String)> {
    let root = workspace();
    let mut c = cmd("git", ["ls-files", "*.rs", "*.md"]);
    c.current_dir(&root);
    read(c)
        .expect("git ls-files")
        .lines()
        .filter_map(|f| {
            let text = std::fs::read_to_string(root.join(f)).ok()?;
            Some((f.to_owned(), text))
        })
        .collect()
}

/// The invariant numbers ARCHITECTURE.md defines (`N. ` items of its
/// `## Invariants` section).
fn defined_invariants(architecture: &str) -> Vec<u32> {
    architecture
        .lines()
        .skip_while(|l| l.trim() != "## Invariants")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.split_once(". ").and_then(|(n, _)| n.parse().ok()))
        .collect()
}

/// The invariant numbers `text` cites ("invariant 7", "Invariant 14").
fn cited_invariants(text: &str) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let lower = line.to_ascii_lowercase();
        let mut rest = lower.as_str();
        while let Some(at) = rest.find("invariant ") {
            rest = &rest[at + "invariant ".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = digits.parse() {
                out.push((i + 1, n));
            }
        }
    }
    out
}

/// `H1`..`H9` as a word.
fn h_labels(text: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let b = line.as_bytes();
            (0..b.len().saturating_sub(1)).any(|i| {
                b[i] == b'H'
                    && b[i + 1].is_ascii_digit()
                    && (i == 0 || !b[i - 1].is_ascii_alphanumeric())
                    && b.get(i + 2).is_none_or(|c| !c.is_ascii_alphanumeric())
            })
        })
        .map(|(i, _)| i + 1)
        .collect()
}

/// A line of code (not a comment) that reaches tokio.
fn imports_tokio(line: &str) -> bool {
    let code = line.trim_start();
    !code.starts_with("//") && (code.contains("tokio::") || code.starts_with("use tokio"))
}

fn architecture() -> String {
    std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn invariants_are_numbered_once_in_order() {
    let defined = defined_invariants(&architecture());
    let expected: Vec<u32> = (1..=u32::try_from(defined.len()).unwrap()).collect();
    assert_eq!(
        defined, expected,
        "ARCHITECTURE.md's invariants must be 1..N"
    );
}

#[test]
fn every_cited_invariant_is_defined() {
    let defined: BTreeSet<u32> = defined_invariants(&architecture()).into_iter().collect();
    let undefined: Vec<String> = sources()
        .iter()
        .flat_map(|(file, text)| {
            cited_invariants(text)
                .into_iter()
                .filter(|(_, n)| !defined.contains(n))
                .map(move |(line, n)| format!("{file}:{line}: invariant {n}"))
        })
        .collect();
    assert!(
        undefined.is_empty(),
        "invariants cited but not defined in ARCHITECTURE.md:\n{}",
        undefined.join("\n")
    );
}

#[test]
fn no_undefined_labels() {
    let found: Vec<String> = sources()
        .iter()
        .filter(|(file, _)| file != "xtask/src/tidy.rs")
        .flat_map(|(file, text)| {
            h_labels(text)
                .into_iter()
                .map(move |line| format!("{file}:{line}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "H<digit> labels are defined nowhere: cite an invariant or a term of ARCHITECTURE.md:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_protocol_core_imports_no_tokio() {
    let proto = PathBuf::from("libvirt-rpc/src/proto/");
    let found: Vec<String> = sources()
        .iter()
        .filter(|(file, _)| file.starts_with(proto.to_str().unwrap_or_default()))
        .flat_map(|(file, text)| {
            text.lines()
                .enumerate()
                .filter(|(_, l)| imports_tokio(l))
                .map(move |(i, _)| format!("{file}:{}", i + 1))
        })
        .collect();
    assert!(
        found.is_empty(),
        "libvirt-rpc's proto/ is sans-IO (conventions: sans-IO cores):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scanners_see_what_they_look_for() {
    assert!(imports_tokio("use tokio::net::TcpStream;"));
    assert!(imports_tokio("    let t = tokio::time::Instant::now();"));
    assert!(!imports_tokio("//! knows nothing about tokio"));
    assert_eq!(
        cited_invariants("see invariant 7 and Invariant 14."),
        [(1, 7), (1, 14)]
    );
    assert_eq!(h_labels("a (H3) b\nH4\nSHA1 H10 xH3"), [1, 2]);
    assert_eq!(
        defined_invariants("## Invariants\n\n1. a\n2. b\n   more\n## Next\n3. c"),
        [1, 2]
    );
}

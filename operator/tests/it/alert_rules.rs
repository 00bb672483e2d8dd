//! The shipped alert rules (deploy/prometheus/): Prometheus's own promtool
//! checks them and runs their unit tests (`rules-test.yaml`), the
//! PrometheusRule carries exactly the rules file, and every series they
//! read is one `/metrics` serves (docs/operator.md's table, which
//! `metrics::tests` keeps equal to the registry).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/prometheus")
}

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir())
        .output()
        .unwrap_or_else(|e| panic!("promtool: {e} (installed by `cargo xtask setup`)"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let checked = promtool(&["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS: 9 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "rules-test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

#[test]
fn the_prometheus_rule_carries_the_rules_file_line_for_line() {
    let rules = std::fs::read_to_string(dir().join("rules.yaml")).unwrap();
    let manifest = std::fs::read_to_string(dir().join("prometheusrule.yaml")).unwrap();
    let groups = &rules[rules.find("groups:").unwrap()..];
    let spec = &manifest[manifest.find("\nspec:\n").unwrap() + "\nspec:\n".len()..];
    let indented: String = groups
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_owned()
            } else {
                format!("  {l}\n")
            }
        })
        .collect();
    assert_eq!(
        spec, indented,
        "prometheusrule.yaml's spec must be rules.yaml's groups indented by two"
    );
}

#[test]
fn every_series_the_rules_read_is_served() {
    let rules = std::fs::read_to_string(dir().join("rules.yaml")).unwrap();
    let docs = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/operator.md"),
    )
    .unwrap();
    let served: BTreeSet<&str> = docs
        .lines()
        .filter_map(|l| l.strip_prefix("| `egress_proxies_"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let read: BTreeSet<String> = rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter_map(|w| w.strip_prefix("egress_proxies_"))
        .map(str::to_owned)
        .collect();
    assert!(read.len() >= 5, "{read:?}");
    for name in &read {
        assert!(
            served.contains(name.as_str()),
            "rules.yaml reads egress_proxies_{name}, which /metrics does not serve"
        );
    }
}

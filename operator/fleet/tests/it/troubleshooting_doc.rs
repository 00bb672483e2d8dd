//! docs/troubleshooting.md has one section per condition reason, and none
//! for a reason that does not exist.

#[test]
fn every_reason_has_a_section_and_every_section_a_reason() {
    let doc = include_str!("../../../../docs/troubleshooting.md");
    let (proxy, _) = doc
        .split_once("## ProxyPool conditions")
        .expect("a ProxyPool section");
    let sections: Vec<&str> = proxy
        .lines()
        .filter_map(|l| l.strip_prefix("### `"))
        .map(|l| l.trim_end_matches('`'))
        .collect();
    let reasons: Vec<&str> = fleet::Reason::ALL.iter().map(|r| r.as_str()).collect();
    let missing: Vec<_> = reasons.iter().filter(|r| !sections.contains(r)).collect();
    let stray: Vec<_> = sections.iter().filter(|s| !reasons.contains(s)).collect();
    assert!(missing.is_empty(), "reasons without a section: {missing:?}");
    assert!(stray.is_empty(), "sections without a reason: {stray:?}");
}

#[test]
fn every_pool_reason_has_a_row_and_every_row_a_reason() {
    let doc = include_str!("../../../../docs/troubleshooting.md");
    let (_, pool) = doc
        .split_once("## ProxyPool conditions")
        .expect("a ProxyPool section");
    let rows: Vec<&str> = pool
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`').map(|(r, _)| r))
        .collect();
    let reasons: Vec<&str> = fleet::pool::PoolReason::ALL
        .iter()
        .map(|r| r.as_str())
        .collect();
    assert_eq!(rows, reasons, "one row per PoolReason, in its order");
}

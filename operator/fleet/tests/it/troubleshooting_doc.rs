//! docs/troubleshooting.md has one section per condition reason, and none
//! for a reason that does not exist.

#[test]
fn every_reason_has_a_section_and_every_section_a_reason() {
    let doc = include_str!("../../../../docs/troubleshooting.md");
    let sections: Vec<&str> = doc
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

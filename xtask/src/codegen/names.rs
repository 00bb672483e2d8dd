//! Rust names for libvirt's: types in `CamelCase` (acronyms as words),
//! fields and methods in `snake_case`, flag members without their shared
//! prefix.

/// `remote_domain_get_xml_desc_args` → `DomainGetXmlDescArgs` (after the
/// caller strips the `remote_` prefix).
pub fn camel(snake: &str) -> String {
    snake
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + &c.as_str().to_ascii_lowercase())
                .unwrap_or_default()
        })
        .collect()
}

/// The words of a C camel-case name: `DomainXMLFlags` → `Domain`, `XML`,
/// `Flags`; `nrVirtCpu` → `nr`, `Virt`, `Cpu`; `usageID` → `usage`, `ID`.
fn words(name: &str) -> Vec<String> {
    let chars: Vec<char> = name.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        let next = chars.get(i + 1).copied();
        // An acronym's plural (`CPUs`) keeps its `s`.
        let plural = next == Some('s') && chars.get(i + 2).is_none_or(|c| !c.is_ascii_lowercase());
        let boundary = c.is_ascii_uppercase()
            && prev.is_some_and(|p| {
                p.is_ascii_lowercase()
                    || p.is_ascii_digit()
                    || (p.is_ascii_uppercase()
                        && next.is_some_and(|n| n.is_ascii_lowercase())
                        && !plural)
            });
        if (boundary || c == '_') && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c != '_' {
            word.push(c);
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A C type name as a Rust type name: `virDomainXMLFlags` →
/// `DomainXmlFlags`, `virDomainUndefineFlagsValues` → `DomainUndefineFlags`.
pub fn c_type(name: &str) -> String {
    let name = name.strip_prefix("vir").unwrap_or(name);
    let name = name.strip_suffix("Values").unwrap_or(name);
    camel(&words(name).join("_"))
}

/// A field or parameter name in `snake_case`, clear of Rust keywords
/// (`type` becomes `kind`, as in the hand-written types before).
pub fn field(name: &str) -> String {
    let snake = words(name)
        .iter()
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    match snake.as_str() {
        "type" => "kind".to_string(),
        "as" | "break" | "const" | "continue" | "crate" | "else" | "enum" | "extern" | "false"
        | "fn" | "for" | "if" | "impl" | "in" | "let" | "loop" | "match" | "mod" | "move"
        | "mut" | "pub" | "ref" | "return" | "self" | "static" | "struct" | "super" | "trait"
        | "true" | "unsafe" | "use" | "where" | "while" | "async" | "await" | "dyn"
        | "abstract" | "become" | "box" | "do" | "final" | "macro" | "override" | "priv"
        | "typeof" | "unsized" | "virtual" | "yield" | "try" | "gen" => format!("r#{snake}"),
        _ => snake,
    }
}

/// The members' names without the prefix they share (`VIR_DOMAIN_XML_`),
/// never starting with a digit and never empty.
pub fn members(names: &[&str]) -> Vec<String> {
    let parts: Vec<Vec<&str>> = names.iter().map(|n| n.split('_').collect()).collect();
    let shortest = parts.iter().map(Vec::len).min().unwrap_or(0);
    let mut shared = (0..shortest)
        .take_while(|&i| parts.iter().all(|p| p[i] == parts[0][i]))
        .count();
    // One member, or one that is the prefix itself: keep its last word.
    if shared >= shortest {
        shared = shortest.saturating_sub(1);
    }
    parts
        .iter()
        .map(|p| {
            let mut from = shared;
            while from > 0 && p[from].starts_with(|c: char| c.is_ascii_digit()) {
                from -= 1;
            }
            p[from..].join("_")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_fields_and_members() {
        assert_eq!(camel("domain_get_xml_desc_args"), "DomainGetXmlDescArgs");
        assert_eq!(c_type("virDomainXMLFlags"), "DomainXmlFlags");
        assert_eq!(
            c_type("virDomainUndefineFlagsValues"),
            "DomainUndefineFlags"
        );
        assert_eq!(
            c_type("virConnectListAllDomainsFlags"),
            "ConnectListAllDomainsFlags"
        );
        assert_eq!(
            c_type("virNodeGetCPUStatsAllCPUs"),
            "NodeGetCpuStatsAllCpus"
        );
        assert_eq!(field("nrVirtCpu"), "nr_virt_cpu");
        assert_eq!(field("usageID"), "usage_id");
        assert_eq!(field("xmlCPUs"), "xml_cpus");
        assert_eq!(field("type"), "kind");
        assert_eq!(field("match"), "r#match");
        assert_eq!(field("hv_ver"), "hv_ver");
        assert_eq!(
            members(&["VIR_DOMAIN_XML_SECURE", "VIR_DOMAIN_XML_UPDATE_CPU"]),
            ["SECURE", "UPDATE_CPU"]
        );
        assert_eq!(members(&["VIR_DOMAIN_DEFINE_VALIDATE"]), ["VALIDATE"]);
        assert_eq!(
            members(&["VIR_X_PAGE_4K", "VIR_X_PAGE_2M"]),
            ["PAGE_4K", "PAGE_2M"]
        );
        assert_eq!(members(&["VIR_A_B", "VIR_A_B_C"]), ["B", "B_C"]);
    }
}

//! What the generator reads from libvirt's own client library
//! (`src/libvirt-*.c` in the tarball): the public functions that add
//! `VIR_TYPED_PARAM_STRING_OKAY` to the caller's flags before the call goes
//! on the wire. libvirtd serializes the reply of those procedures with the
//! caller's flags and leaves string-valued parameters out without the bit,
//! so a client that sends the caller's flags unchanged silently loses them
//! (`numa_nodeset`, `device_weight`, `group_name`, ...).

use std::collections::BTreeSet;

/// The statement libvirt's client code uses to add the bit.
const ADDS_STRING_OKAY: &str = "flags |= VIR_TYPED_PARAM_STRING_OKAY";

/// The public functions (`virDomainGetBlkioParameters`, ...) whose body
/// adds `VIR_TYPED_PARAM_STRING_OKAY` to `flags`, found in one C file.
///
/// A function is named by the gtk-doc header every public function of
/// libvirt's client library carries (`/**` then ` * virName:`), which holds
/// however the signature below it is laid out.
pub fn string_okay_functions(c_source: &str) -> BTreeSet<String> {
    let mut current: Option<&str> = None;
    let mut found = BTreeSet::new();
    for line in c_source.lines() {
        if let Some(name) = doc_header(line) {
            current = Some(name);
        } else if line.trim_start().starts_with(ADDS_STRING_OKAY)
            && let Some(name) = current
        {
            found.insert(name.to_string());
        }
    }
    found
}

/// ` * virDomainGetBlkioParameters:` → `virDomainGetBlkioParameters`.
fn doc_header(line: &str) -> Option<&str> {
    let name = line.strip_prefix(" * ")?.strip_suffix(':')?;
    (name.starts_with("vir") && name.chars().all(|c| c.is_ascii_alphanumeric())).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: &str = "\
/**
 * virDomainGetBlkioParameters:
 * @domain: pointer to domain object
 * @flags: bitwise-OR of virDomainModificationImpact and virTypedParameterFlags
 *
 * Returns -1 in case of error, 0 in case of success.
 */
int
virDomainGetBlkioParameters(virDomainPtr domain,
                            unsigned int flags)
{
    if (rc)
        flags |= VIR_TYPED_PARAM_STRING_OKAY;
}

/**
 * virDomainGetLaunchSecurityInfo:
 * @flags: currently used, set to 0.
 */
int virDomainGetLaunchSecurityInfo(virDomainPtr domain, unsigned int flags)
{
    if (rc)
        flags |= VIR_TYPED_PARAM_STRING_OKAY;
}

/**
 * virDomainSetBlkioParameters:
 * @flags: bitwise-OR of virDomainModificationImpact
 */
int
virDomainSetBlkioParameters(virDomainPtr domain, unsigned int flags)
{
    if (flags & VIR_TYPED_PARAM_STRING_OKAY)
        return 0;
}
";

    #[test]
    fn finds_functions_that_add_the_bit_whatever_their_layout() {
        let found: Vec<String> = string_okay_functions(C).into_iter().collect();
        assert_eq!(
            found,
            [
                "virDomainGetBlkioParameters",
                "virDomainGetLaunchSecurityInfo"
            ]
        );
    }

    #[test]
    fn a_doc_header_is_a_name_and_a_colon() {
        assert_eq!(
            doc_header(" * virNodeGetSEVInfo:"),
            Some("virNodeGetSEVInfo")
        );
        assert_eq!(doc_header(" * @flags: extra flags"), None);
        assert_eq!(doc_header(" * virDomainFoo: does things"), None);
        assert_eq!(doc_header(" * Returns: 0"), None);
    }
}

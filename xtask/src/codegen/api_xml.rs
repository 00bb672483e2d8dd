//! What the generator reads from libvirt's API description
//! (`libvirt-api.xml` and its QEMU and LXC siblings, shipped by Debian's
//! `libvirt-dev`): each public function's documentation and its `flags`
//! argument's enum, each enum's members, and the string constants libvirt
//! defines (typed-parameter names such as `VIR_DOMAIN_BLKIO_WEIGHT`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};

/// One `<enum>` member: `VIR_DOMAIN_DESTROY_GRACEFUL = 1`.
#[derive(Debug, Clone)]
pub struct EnumMember {
    pub name: String,
    pub value: i64,
}

/// One `<function>`: its module (`libvirt-domain`, naming its page in
/// libvirt's documentation) and, per argument, the text that describes it
/// (read for the flags enum it names; libvirt's prose is not copied).
#[derive(Debug, Clone, Default)]
pub struct Function {
    pub module: String,
    pub args: Vec<(String, String)>,
}

/// An enum member's value as written: a number or another member's name.
enum Value {
    Num(i64),
    Alias(String),
}

/// The parts of an API description the generator uses.
#[derive(Debug, Default)]
pub struct Api {
    /// Enum typedef name (`virDomainDestroyFlagsValues`) → its members, in
    /// value order.
    pub enums: BTreeMap<String, Vec<EnumMember>>,
    /// C function name (`virDomainDestroyFlags`) → its description.
    pub functions: BTreeMap<String, Function>,
    /// String macros: `VIR_DOMAIN_BLKIO_WEIGHT` → (`weight`, the libvirt
    /// version that added it).
    pub strings: BTreeMap<String, (String, String)>,
}

impl Api {
    /// Reads one or more API description files into one.
    pub fn parse(texts: &[&str]) -> Result<Api> {
        let mut api = Api::default();
        let mut raw = Vec::new();
        for text in texts {
            let doc = roxmltree::Document::parse(text).context("API XML")?;
            for node in doc.descendants() {
                match node.tag_name().name() {
                    "enum"
                        if node
                            .parent()
                            .is_some_and(|p| p.tag_name().name() == "symbols") =>
                    {
                        let (Some(name), Some(ty), Some(value)) = (
                            node.attribute("name"),
                            node.attribute("type"),
                            node.attribute("value"),
                        ) else {
                            continue;
                        };
                        // A value naming another member is resolved below.
                        let value = match value.parse::<i64>() {
                            Ok(v) => Value::Num(v),
                            Err(_) => Value::Alias(value.to_string()),
                        };
                        raw.push((ty.to_string(), name.to_string(), value));
                    }
                    "macro" => {
                        let (Some(name), Some(value)) =
                            (node.attribute("name"), node.attribute("string"))
                        else {
                            continue;
                        };
                        api.strings.insert(
                            name.to_string(),
                            (
                                value.to_string(),
                                node.attribute("version").unwrap_or_default().to_string(),
                            ),
                        );
                    }
                    "function" => {
                        let Some(name) = node.attribute("name") else {
                            continue;
                        };
                        let mut f = Function {
                            module: node.attribute("file").unwrap_or_default().to_string(),
                            args: Vec::new(),
                        };
                        for child in node.children().filter(|c| c.tag_name().name() == "arg") {
                            f.args.push((
                                child.attribute("name").unwrap_or_default().to_string(),
                                child.attribute("info").unwrap_or_default().to_string(),
                            ));
                        }
                        api.functions.insert(name.to_string(), f);
                    }
                    _ => {}
                }
            }
        }
        let numbers: BTreeMap<&str, i64> = raw
            .iter()
            .filter_map(|(_, n, v)| match v {
                Value::Num(v) => Some((n.as_str(), *v)),
                Value::Alias(_) => None,
            })
            .collect();
        for (ty, name, value) in &raw {
            let value = match value {
                Value::Num(v) => *v,
                Value::Alias(other) => match numbers.get(other.as_str()) {
                    Some(v) => *v,
                    None => continue,
                },
            };
            api.enums.entry(ty.clone()).or_default().push(EnumMember {
                name: name.clone(),
                value,
            });
        }
        for members in api.enums.values_mut() {
            members.sort_by_key(|m| m.value);
        }
        Ok(api)
    }

    /// The function a procedure calls (`DOMAIN_GET_XML_DESC` →
    /// `virDomainGetXMLDesc`; in the QEMU program `DOMAIN_MONITOR_COMMAND` →
    /// `virDomainQemuMonitorCommand`): names compared without case and
    /// underscores, and without the program's name.
    pub fn function_for(&self, procedure: &str, program: &str) -> Option<(&str, &Function)> {
        let norm = |s: &str| -> String {
            s.chars()
                .filter(|c| *c != '_')
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let key = norm(&format!("vir{procedure}"));
        self.functions
            .iter()
            .find(|(name, _)| {
                let n = norm(name);
                n == key || (program != "remote" && n.replacen(program, "", 1) == key)
            })
            .map(|(n, f)| (n.as_str(), f))
    }

    /// The enum a `flags` argument's description names ("bitwise-OR of
    /// virDomainDestroyFlagsValues"): the first `vir...` word that is a
    /// known enum.
    pub fn flags_enum(&self, info: &str) -> Option<&str> {
        info.split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| w.starts_with("vir"))
            .find_map(|w| self.enums.get_key_value(w).map(|(k, _)| k.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = "<api name='libvirt'><files/><symbols>
      <enum name='VIR_DOMAIN_DESTROY_GRACEFUL' file='f' value='1' type='virDomainDestroyFlagsValues' info='only SIGTERM'/>
      <enum name='VIR_DOMAIN_DESTROY_DEFAULT' file='f' value='0' type='virDomainDestroyFlagsValues' info='default'/>
      <function name='virDomainDestroyFlags' file='libvirt-domain' module='libvirt-domain'>
        <info><![CDATA[Destroy the domain object.]]></info>
        <return type='int' info='0'/>
        <arg name='domain' type='virDomainPtr' info='a domain object'/>
        <arg name='flags' type='unsigned int' info='bitwise-OR of virDomainDestroyFlagsValues'/>
      </function>
      <function name='virDomainGetXMLDesc' file='f'><info>x</info></function>
      <macro name='VIR_DOMAIN_BLKIO_WEIGHT' file='libvirt-domain' string='weight' version='0.9.0'>
        <info><![CDATA[prose]]></info>
      </macro>
      <macro name='VIR_UUID_BUFLEN' file='libvirt-host'><info>x</info></macro>
    </symbols></api>";

    #[test]
    fn reads_enums_functions_and_flag_types() {
        let api = Api::parse(&[XML]).unwrap();
        let members = &api.enums["virDomainDestroyFlagsValues"];
        assert_eq!(members[0].name, "VIR_DOMAIN_DESTROY_DEFAULT");
        assert_eq!(members[1].value, 1);
        let (name, f) = api.function_for("DOMAIN_DESTROY_FLAGS", "remote").unwrap();
        assert_eq!(name, "virDomainDestroyFlags");
        assert_eq!(f.module, "libvirt-domain");
        assert_eq!(
            api.flags_enum(&f.args[1].1),
            Some("virDomainDestroyFlagsValues")
        );
        assert_eq!(api.flags_enum("extra flags; not used yet"), None);
        assert_eq!(
            api.function_for("DOMAIN_GET_XML_DESC", "remote").unwrap().0,
            "virDomainGetXMLDesc"
        );
        assert_eq!(
            api.strings["VIR_DOMAIN_BLKIO_WEIGHT"],
            ("weight".to_owned(), "0.9.0".to_owned())
        );
        assert_eq!(api.strings.len(), 1, "a macro without a string is not one");
    }
}

//! The data files: `limits.rs` (list and string maxima), `types.rs` (every
//! struct and union), the type list, procedure numbers and flags.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use super::super::names;
use super::super::overrides::{self, find};
use super::super::xdr_lang::{Def, Value};
use super::*;

pub(super) fn limits(m: &Model) -> Result<String> {
    let mut out = String::from(
        "//! libvirt's protocol constants (`REMOTE_*`, `QEMU_*`, `LXC_*` in the `.x`\n\
         //! files): the maxima of variable-length fields, enforced per field by\n\
         //! [`crate::xdr_struct!`] in both directions, and the program numbers.\n\n",
    );
    for p in m.programs {
        for d in &p.defs {
            if let Def::Const { name, value } = d {
                let n = m.number(value)?;
                let ty = if name.ends_with("_PROGRAM") || name.ends_with("_PROTOCOL_VERSION") {
                    "u32"
                } else {
                    "usize"
                };
                let value = if name == "REMOTE_STRING_MAX" {
                    "crate::proto::xdr::STRING_MAX".to_string()
                } else if ty == "usize" {
                    group(n)
                } else if name.ends_with("_PROGRAM") {
                    format!("{n:#010x}")
                } else {
                    n.to_string()
                };
                let _ = writeln!(
                    out,
                    "/// `{name}` ({}).\npub const {name}: {ty} = {value};",
                    group(n)
                );
            }
        }
    }
    Ok(out)
}

/// `16384` → `16_384`.
pub(super) fn group(n: i64) -> String {
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

pub(super) fn types(m: &Model) -> Result<String> {
    let mut out = String::from(
        "//! Every struct and union of libvirt's remote, QEMU and LXC protocols\n\
         //! (the procedures' `_args`, `_ret` and event `_msg` structs and what\n\
         //! they hold), with their codecs.\n\n\
         #![allow(clippy::doc_markdown)]\n\n\
         use crate::proto::limits::*;\n\n",
    );
    for p in m.programs {
        for d in &p.defs {
            let name = d.name();
            if find(overrides::HAND_TYPES, |r| r.0 == name).is_some() {
                continue;
            }
            match d {
                Def::Struct { fields, .. } => {
                    let rust = m.type_name(name);
                    let mut body = String::new();
                    let mut eq = true;
                    for f in fields {
                        let field = names::field(&f.name);
                        let ty =
                            match find(overrides::FIELD_TYPES, |r| r.0 == name && r.1 == f.name) {
                                Some((_, _, rust, _)) => Ty {
                                    owned: (*rust).to_string(),
                                    max: None,
                                    param: String::new(),
                                },
                                None => m.ty(f).with_context(|| format!("{name}.{}", f.name))?,
                            };
                        if !m.is_eq(f) {
                            eq = false;
                        }
                        let max = ty.max.map(|m| format!("<{m}>")).unwrap_or_default();
                        let _ = writeln!(
                            body,
                            "        /// `{}`.\n        pub {field}{max}: {},",
                            f.name, ty.owned
                        );
                    }
                    let no_eq = if eq || fields.is_empty() {
                        ""
                    } else {
                        "    #[xdr(no_eq)]\n"
                    };
                    if fields.is_empty() {
                        continue;
                    }
                    let _ = write!(
                        out,
                        "crate::xdr_struct! {{\n{no_eq}    /// `{name}`.\n    pub struct {rust} {{\n{body}    }}\n}}\n\n"
                    );
                }
                Def::Union {
                    discriminant, arms, ..
                } => {
                    let rust = m.type_name(name);
                    let dty = m.ty(discriminant)?.owned;
                    let mut body = String::new();
                    for a in arms {
                        for case in &a.cases {
                            let value = m.number(case)?;
                            let var = match case {
                                Value::Name(n) => names::camel(&n.to_ascii_lowercase()),
                                Value::Num(n) => format!("Case{n}"),
                            };
                            match &a.decl {
                                Some(decl) => {
                                    let ty = m.ty(decl)?;
                                    let max = ty.max.map(|m| format!("<{m}>")).unwrap_or_default();
                                    let _ = writeln!(
                                        body,
                                        "        /// `case {value}: {}`.\n        {var}{max}({}) = {value},",
                                        decl.name, ty.owned
                                    );
                                }
                                None => {
                                    let _ = writeln!(
                                        body,
                                        "        /// `case {value}: void`.\n        {var} = {value},"
                                    );
                                }
                            }
                        }
                    }
                    let _ = write!(
                        out,
                        "crate::xdr_union! {{\n    /// `{name}`.\n    pub enum {rust} switch ({dty}) {{\n{body}    }}\n}}\n\n"
                    );
                }
                Def::Enum { members, .. } if !name.ends_with("_procedure") => {
                    let _ = writeln!(out, "// `enum {name}`: travels as an `int`.");
                    for mem in members {
                        let _ = writeln!(
                            out,
                            "/// `{}`.\npub const {}: i32 = {};",
                            mem.name,
                            mem.name,
                            m.number(&mem.value)?
                        );
                    }
                    out.push('\n');
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// `for_each_type!`: every generated struct and union, for the crate's
/// round-trip tests and the fuzzer.
pub(super) fn type_list(m: &Model) -> String {
    let mut names = Vec::new();
    for p in m.programs {
        for d in &p.defs {
            let n = d.name();
            let generated = matches!(d, Def::Struct { fields, .. } if !fields.is_empty())
                || matches!(d, Def::Union { .. });
            if generated && find(overrides::HAND_TYPES, |r| r.0 == n).is_none() {
                names.push(format!("$crate::remote::{}", m.type_name(n)));
            }
        }
    }
    format!(
        "/// Calls `$m!` with the path of every generated struct and union (for\n\
         /// round-trip tests and fuzzers).\n\
         #[doc(hidden)]\n\
         #[macro_export]\n\
         macro_rules! __for_each_remote_type {{\n    ($m:ident) => {{\n        $m!({});\n    }};\n}}\n",
        names.join(", ")
    )
}

pub(super) fn proc_num(procedures: &[Procedure]) -> String {
    let mut out = String::from(
        "//! Procedure numbers (`REMOTE_PROC_*` without the prefix; the QEMU and\n\
         //! LXC programs' in [`qemu`] and [`lxc`]) and their names for logs and\n\
         //! spans.\n\n",
    );
    for program in ["remote", "qemu", "lxc"] {
        let indent = if program == "remote" { "" } else { "    " };
        if program != "remote" {
            let _ = writeln!(
                out,
                "/// Procedure numbers of the {} program.\npub mod {program} {{",
                program.to_ascii_uppercase()
            );
        }
        for p in procedures.iter().filter(|p| p.program == program) {
            let _ = writeln!(
                out,
                "{indent}/// `{}`.\n{indent}pub const {}: i32 = {};",
                p.full_name, p.short_name, p.number
            );
        }
        let _ = writeln!(
            out,
            "\n{indent}/// The procedure's name for logs and spans (`\"domain_get_state\"`), `None`\n\
             {indent}/// for a number the program does not define.\n\
             {indent}pub fn name(procedure: i32) -> Option<&'static str> {{\n\
             {indent}    Some(match procedure {{"
        );
        for p in procedures.iter().filter(|p| p.program == program) {
            let _ = writeln!(
                out,
                "{indent}        {} => \"{}\",",
                p.short_name,
                p.short_name.to_ascii_lowercase()
            );
        }
        let _ = writeln!(
            out,
            "{indent}        _ => return None,\n{indent}    }})\n{indent}}}"
        );
        let _ = writeln!(
            out,
            "\n{indent}/// Every procedure number of the program.\n{indent}pub const ALL: &[i32] = &["
        );
        for p in procedures.iter().filter(|p| p.program == program) {
            let _ = writeln!(out, "{indent}    {},", p.short_name);
        }
        let _ = writeln!(out, "{indent}];");
        if program != "remote" {
            out.push_str("}\n");
        }
        out.push('\n');
    }
    out
}

pub(super) fn flags(m: &Model) -> Result<String> {
    let mut out = String::from(
        "//! libvirt's flag sets, as the API description defines them: one\n\
         //! bitflags type per enum a procedure's `flags` argument takes. Unknown\n\
         //! bits are kept (`from_bits_retain`), so a newer daemon's flags\n\
         //! survive a round trip.\n\n\
         use bitflags::bitflags;\n\n",
    );
    for (c, rust) in &m.flags {
        let members = &m.api.enums[c];
        let names: Vec<&str> = members.iter().map(|e| e.name.as_str()).collect();
        let short = names::members(&names);
        let mut body = String::new();
        for (e, n) in members.iter().zip(&short) {
            if e.value < 0 || e.value > i64::from(u32::MAX) {
                continue;
            }
            let _ = writeln!(
                body,
                "        /// `{}`.\n        const {n} = {};",
                e.name, e.value
            );
        }
        let _ = write!(
            out,
            "bitflags! {{\n    /// `{c}`.\n    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]\n    pub struct {rust}: u32 {{\n{body}    }}\n}}\n\n"
        );
    }
    let list: Vec<&str> = m.flags.values().map(String::as_str).collect();
    let _ = writeln!(out, "crate::flags::wire_flags!({});", list.join(", "));
    Ok(out)
}

//! From parsed `.x` files and the API description to Rust source.
//!
//! The rules (exceptions live in `overrides.rs`, each with its reason):
//! - **Types.** `remote_nonnull_X` is `X`, other `remote_x_y` are `XY`,
//!   `qemu_`/`lxc_` types keep their program as a prefix (`QemuX`).
//!   Typedefs are resolved where used: `remote_nonnull_string` is a
//!   `String`, `remote_string` an `Option<String>`, `remote_uuid` a
//!   [u8; 16]. Every list and string carries its `.x` maximum (strings at
//!   `REMOTE_STRING_MAX` use the codec's default, the same number).
//!   `unsigned char` travels as a word and is a `u32`; XDR enums are `i32`.
//! - **Methods.** One per procedure with an `_args`/`_ret` pair (or
//!   neither), named for it in snake case (`qemu_` prefix for the QEMU
//!   program). Borrowed parameters, encoded in place (no copy). Hidden:
//!   `need_results` (always 1), and a count argument (`nparams`, `max*`)
//!   beside a reply holding one bounded list (sent as that list's maximum);
//!   in the reply, a count (`ret`, `nparams`) beside a list. A reply of one
//!   field is that field. `flags` are the bitflags type the API description
//!   names for the C function's `flags`, [`NoFlags`] where it says they
//!   are unused, else `u32`. Where libvirt's client library adds
//!   `VIR_TYPED_PARAM_STRING_OKAY` to the flags before sending them
//!   (`client_c.rs` finds where), the method sends it too.
//! - **Streams.** A stream procedure's method opens the stream and returns
//!   it (`Upload` for `@writestream`, `Download` for `@readstream`,
//!   `Duplex` where `overrides::STREAM_KINDS` says both ways), beside the
//!   opening reply's body when it has one. Volume upload and download keep
//!   their hand-written methods (`overrides::STREAM_METHODS`).
//! - **No method** for event messages and event (de)registration (owned by
//!   `Client::subscribe`) and the procedures `overrides::NO_METHOD` lists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use super::api_xml::Api;
use super::names;
use super::overrides::{self, find};
use super::xdr_lang::{Base, Decl, Def, Member, Shape, Value};

/// One RPC program's definitions and naming.
pub struct Program {
    /// `remote`, `qemu` or `lxc`.
    pub name: &'static str,
    pub defs: Vec<Def>,
}

impl Program {
    fn type_prefix(&self) -> String {
        format!("{}_", self.name)
    }
    fn proc_prefix(&self) -> String {
        format!("{}_PROC_", self.name.to_ascii_uppercase())
    }
    fn method_prefix(&self) -> &'static str {
        match self.name {
            "remote" => "",
            "qemu" => "qemu_",
            _ => "lxc_",
        }
    }
    fn constant(&self, suffix: &str) -> String {
        format!("{}_{suffix}", self.name.to_ascii_uppercase())
    }
}

/// What a procedure became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// A `Client` method of this name.
    Method(String),
    /// A stream, wired to this hand-written method.
    StreamMethod(String),
    /// A stream opened by a generated method of this name.
    StreamCall(String, StreamKind),
    /// An event message the daemon sends (decoded by `crate::events`).
    EventMessage,
    /// Event (de)registration, done by `Client::subscribe`.
    EventRegistration,
    /// No method, for this reason.
    Unsupported(String),
}

/// Which way a stream's data flows, seen from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// The client sends (`@writestream`): `crate::Upload`.
    Upload,
    /// The daemon sends (`@readstream`): `crate::Download`.
    Download,
    /// Both send (consoles, channels): `crate::Duplex`.
    Duplex,
}

impl StreamKind {
    fn parse(word: &str) -> Result<Self> {
        Ok(match word {
            "upload" => Self::Upload,
            "download" => Self::Download,
            "duplex" => Self::Duplex,
            other => bail!("unknown stream kind {other}"),
        })
    }

    /// The stream type and the `Client` function that opens it.
    fn rust(self) -> (&'static str, &'static str) {
        match self {
            Self::Upload => ("Upload", "open_upload"),
            Self::Download => ("Download", "open_download"),
            Self::Duplex => ("Duplex", "open_duplex"),
        }
    }
}

/// One procedure of a program.
#[derive(Debug, Clone)]
pub struct Procedure {
    pub program: &'static str,
    /// `REMOTE_PROC_DOMAIN_GET_STATE`.
    pub full_name: String,
    /// `DOMAIN_GET_STATE`.
    pub short_name: String,
    pub number: i64,
    pub status: Status,
}

/// Everything the generator knows, indexed.
pub struct Model<'a> {
    programs: &'a [Program],
    api: &'a Api,
    typedefs: HashMap<String, Decl>,
    /// struct/union name → its definition.
    records: HashMap<String, &'a Def>,
    enums: HashMap<String, Vec<Member>>,
    consts: HashMap<String, Value>,
    /// Flags enums used by methods: C name → Rust name.
    flags: BTreeMap<String, String>,
    /// C functions that add `VIR_TYPED_PARAM_STRING_OKAY` to their flags.
    string_okay: &'a BTreeSet<String>,
    /// Those of them a method was generated for.
    string_okay_used: BTreeSet<String>,
}

/// A Rust type for a declaration: the owned type, its maximum (a constant
/// path) when it has one of its own, and the parameter form.
#[derive(Debug, Clone)]
struct Ty {
    owned: String,
    max: Option<String>,
    param: String,
}

impl<'a> Model<'a> {
    pub fn new(
        programs: &'a [Program],
        api: &'a Api,
        string_okay: &'a BTreeSet<String>,
    ) -> Result<Model<'a>> {
        let mut m = Model {
            programs,
            api,
            string_okay,
            string_okay_used: BTreeSet::new(),
            typedefs: HashMap::new(),
            records: HashMap::new(),
            enums: HashMap::new(),
            consts: HashMap::new(),
            flags: BTreeMap::new(),
        };
        for p in programs {
            for d in &p.defs {
                match d {
                    Def::Typedef(t) => {
                        m.typedefs.insert(t.name.clone(), t.clone());
                    }
                    Def::Struct { name, .. } | Def::Union { name, .. } => {
                        m.records.insert(name.clone(), d);
                    }
                    Def::Enum { name, members } => {
                        m.enums.insert(name.clone(), members.clone());
                    }
                    Def::Const { name, value } => {
                        m.consts.insert(name.clone(), value.clone());
                    }
                }
            }
        }
        Ok(m)
    }

    /// The Rust name of a `.x` struct or union.
    fn type_name(&self, xdr: &str) -> String {
        if let Some((_, rust, _)) = find(overrides::HAND_TYPES, |r| r.0 == xdr) {
            return rust.to_string();
        }
        if let Some((_, rust, _)) = find(overrides::TYPE_NAMES, |r| r.0 == xdr) {
            return rust.to_string();
        }
        if let Some(rest) = xdr.strip_prefix("remote_") {
            return names::camel(rest.strip_prefix("nonnull_").unwrap_or(rest));
        }
        names::camel(xdr)
    }

    /// A constant's value as a number.
    fn number(&self, v: &Value) -> Result<i64> {
        match v {
            Value::Num(n) => Ok(*n),
            Value::Name(n) => {
                if let Some(v) = self.consts.get(n) {
                    return self.number(v);
                }
                find(overrides::C_CONSTANTS, |c| c.0 == n)
                    .map(|c| c.1)
                    .with_context(|| format!("unknown constant {n}"))
            }
        }
    }

    /// A maximum as the path of a constant (`<16>` is not written by
    /// libvirt; a literal would need a name).
    fn max_path(&self, v: &Value) -> Result<Option<String>> {
        match v {
            Value::Name(n) if n == "REMOTE_STRING_MAX" => Ok(None),
            Value::Name(n) if self.consts.contains_key(n) => Ok(Some(n.clone())),
            Value::Name(n) => bail!("maximum {n} is not a .x constant"),
            Value::Num(n) => bail!("literal maximum {n}"),
        }
    }

    /// The Rust type of a declaration (typedefs resolved).
    fn ty(&self, d: &Decl) -> Result<Ty> {
        // A typedef: its own shape wraps what the declaration adds.
        if let Some(t) = match &d.base {
            Base::Named(n) => self.typedefs.get(n),
            _ => None,
        } {
            let inner = self.ty(t)?;
            return self.shaped(inner, &d.shape, false);
        }
        let scalar = |owned: &str| Ty {
            owned: owned.into(),
            max: None,
            param: owned.into(),
        };
        let one = match &d.base {
            Base::Int => scalar("i32"),
            Base::UInt | Base::UChar => scalar("u32"),
            Base::Hyper => scalar("i64"),
            Base::UHyper => scalar("u64"),
            Base::Char => scalar("i8"),
            Base::Short => scalar("i16"),
            Base::UShort => scalar("u16"),
            Base::Float => scalar("f32"),
            Base::Double => scalar("f64"),
            Base::Bool => scalar("bool"),
            Base::String => {
                let max = match &d.shape {
                    Shape::Var(Some(v)) => self.max_path(v)?,
                    Shape::Var(None) => None,
                    s => bail!("string {} shaped {s:?}", d.name),
                };
                return Ok(Ty {
                    owned: "String".into(),
                    max,
                    param: "&str".into(),
                });
            }
            Base::Opaque => {
                return match &d.shape {
                    Shape::Var(max) => Ok(Ty {
                        owned: "Vec<u8>".into(),
                        max: max
                            .as_ref()
                            .map(|v| self.max_path(v))
                            .transpose()?
                            .flatten(),
                        param: "&[u8]".into(),
                    }),
                    Shape::Fixed(n) => {
                        let n = self.number(n)?;
                        Ok(Ty {
                            owned: format!("[u8; {n}]"),
                            max: None,
                            param: format!("&[u8; {n}]"),
                        })
                    }
                    s => bail!("opaque {} shaped {s:?}", d.name),
                };
            }
            Base::Named(n) if self.enums.contains_key(n) => scalar("i32"),
            Base::Named(n)
                if self.records.contains_key(n)
                    || find(overrides::HAND_TYPES, |r| r.0 == n).is_some() =>
            {
                let name = self.type_name(n);
                Ty {
                    param: format!("&{name}"),
                    owned: name,
                    max: None,
                }
            }
            Base::Named(n) => bail!("unknown type {n}"),
        };
        self.shaped(one, &d.shape, true)
    }

    /// Applies a declaration's shape to its element type.
    fn shaped(&self, one: Ty, shape: &Shape, by_value: bool) -> Result<Ty> {
        let copy = by_value && !one.param.starts_with('&');
        Ok(match shape {
            Shape::One => one,
            Shape::Optional => Ty {
                owned: format!("Option<{}>", one.owned),
                max: one.max,
                param: if one.param.starts_with('&') || copy {
                    format!("Option<{}>", one.param)
                } else {
                    format!("Option<&{}>", one.owned)
                },
            },
            Shape::Var(max) => {
                if one.max.is_some() {
                    bail!("a list of individually bounded values ({})", one.owned);
                }
                Ty {
                    param: format!("&[{}]", one.owned),
                    owned: format!("Vec<{}>", one.owned),
                    max: max
                        .as_ref()
                        .map(|v| self.max_path(v))
                        .transpose()?
                        .flatten(),
                }
            }
            Shape::Fixed(n) => {
                let n = self.number(n)?;
                Ty {
                    param: format!("&[{}; {n}]", one.owned),
                    owned: format!("[{}; {n}]", one.owned),
                    max: None,
                }
            }
        })
    }

    /// Whether a declaration's type can derive `Eq` (no floats, no typed
    /// parameters, nothing holding them).
    fn is_eq(&self, d: &Decl) -> bool {
        match &d.base {
            Base::Float | Base::Double => false,
            Base::Named(n) => {
                if let Some(t) = self.typedefs.get(n) {
                    return self.is_eq(t);
                }
                if find(overrides::HAND_TYPES, |r| r.0 == n).is_some() {
                    return false;
                }
                match self.records.get(n) {
                    Some(Def::Struct { fields, .. }) => fields.iter().all(|f| self.is_eq(f)),
                    Some(Def::Union { arms, .. }) => arms
                        .iter()
                        .all(|a| a.decl.as_ref().is_none_or(|f| self.is_eq(f))),
                    _ => true,
                }
            }
            _ => true,
        }
    }

    fn struct_fields(&self, xdr: &str) -> Option<&'a [Decl]> {
        match self.records.get(xdr) {
            Some(Def::Struct { fields, .. }) => Some(fields),
            _ => None,
        }
    }

    /// Every procedure of every program, with what it becomes.
    pub fn procedures(&self) -> Result<Vec<Procedure>> {
        let mut out = Vec::new();
        for p in self.programs {
            let enum_name = format!("{}_procedure", p.name);
            let members = self
                .enums
                .get(&enum_name)
                .with_context(|| format!("{enum_name} missing"))?;
            for m in members {
                let short = m
                    .name
                    .strip_prefix(&p.proc_prefix())
                    .with_context(|| format!("{} lacks {}", m.name, p.proc_prefix()))?
                    .to_string();
                let lower = short.to_ascii_lowercase();
                let base = format!("{}{lower}", p.type_prefix());
                let stream = match find(overrides::STREAM_KINDS, |r| r.0 == m.name) {
                    Some((_, kind, _)) => Some(StreamKind::parse(kind)?),
                    None if m.comment.contains("@writestream") => Some(StreamKind::Upload),
                    None if m.comment.contains("@readstream") => Some(StreamKind::Download),
                    None => None,
                };
                let status = if let Some((_, why)) = find(overrides::NO_METHOD, |r| r.0 == m.name) {
                    Status::Unsupported((*why).to_string())
                } else if let Some(kind) = stream {
                    match find(overrides::STREAM_METHODS, |r| r.0 == m.name) {
                        Some((_, method)) => Status::StreamMethod((*method).to_string()),
                        None => Status::StreamCall(format!("{}{lower}", p.method_prefix()), kind),
                    }
                } else if self.records.contains_key(&format!("{base}_msg")) {
                    Status::EventMessage
                } else if short.contains("EVENT") && short.contains("REGISTER") {
                    Status::EventRegistration
                } else {
                    Status::Method(format!("{}{lower}", p.method_prefix()))
                };
                out.push(Procedure {
                    program: p.name,
                    full_name: m.name.clone(),
                    short_name: short,
                    number: self.number(&m.value)?,
                    status,
                });
            }
        }
        Ok(out)
    }

    /// The Rust type of a `flags` argument of `procedure`.
    fn flags_type(&mut self, program: &Program, short: &str) -> String {
        let Some((_, f)) = self.api.function_for(short, program.name) else {
            return "u32".into();
        };
        let Some((_, info)) = f.args.iter().find(|(n, _)| n == "flags") else {
            return "u32".into();
        };
        if let Some(e) = self.api.flags_enum(info) {
            let rust = names::c_type(e);
            self.flags.insert(e.to_string(), rust.clone());
            return format!("crate::flags::{rust}");
        }
        let lower = info.to_ascii_lowercase();
        if [
            "not used yet",
            "unused",
            "pass 0",
            "use 0",
            "pass zero",
            "set to 0",
        ]
        .iter()
        .any(|w| lower.contains(w))
        {
            "crate::flags::NoFlags".into()
        } else {
            "u32".into()
        }
    }
}

/// The sweep tests' pinned outcomes (method → `answered` or
/// `libvirt <ErrorCode>`), for the status table.
pub struct Swept {
    /// Every method, on a private test-driver instance.
    pub test_driver: BTreeMap<String, String>,
    /// A chosen set, on `qemu:///system`.
    pub qemu: BTreeMap<String, String>,
}

/// The generated files: path under `libvirt-rpc/src/generated/` → text.
pub fn generate(
    programs: &[Program],
    api: &Api,
    string_okay: &BTreeSet<String>,
    version: &str,
    swept: &Swept,
) -> Result<BTreeMap<String, String>> {
    let mut model = Model::new(programs, api, string_okay)?;
    let procedures = model.procedures()?;
    let header = format!(
        "// @generated by `cargo xtask codegen libvirt-rpc` from libvirt {version}'s\n\
         // remote, QEMU and LXC protocol files and API descriptions. Do not edit:\n\
         // change the generator (xtask/src/codegen/) and run it again.\n\n"
    );
    let mut files = BTreeMap::new();
    files.insert("limits.rs".to_string(), header.clone() + &limits(&model)?);
    files.insert(
        "types.rs".to_string(),
        header.clone() + &types(&model)? + &type_list(&model),
    );
    files.insert(
        "proc_num.rs".to_string(),
        header.clone() + &proc_num(&procedures),
    );
    files.insert(
        "calls.rs".to_string(),
        header.clone() + &calls(&mut model, &procedures)?,
    );
    let missed: Vec<&String> = string_okay.difference(&model.string_okay_used).collect();
    if !missed.is_empty() {
        bail!(
            "libvirt's client adds VIR_TYPED_PARAM_STRING_OKAY in {missed:?}, but no generated method calls them"
        );
    }
    files.insert("flags.rs".to_string(), header.clone() + &flags(&model)?);
    files.insert(
        "sweep.rs".to_string(),
        header.clone() + &sweep(&mut model, &procedures)?,
    );
    files.insert("status.md".to_string(), status_table(&procedures, swept));
    Ok(files)
}

fn limits(m: &Model) -> Result<String> {
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
fn group(n: i64) -> String {
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

fn types(m: &Model) -> Result<String> {
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
fn type_list(m: &Model) -> String {
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

fn proc_num(procedures: &[Procedure]) -> String {
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

/// One method's parts.
struct Method {
    params: Vec<(String, String)>,
    /// The arguments' encoded values, in `.x` order.
    args: Vec<String>,
    ret_type: String,
    out_type: String,
    map: Option<String>,
    /// The flags go out with `VIR_TYPED_PARAM_STRING_OKAY` added.
    string_okay: bool,
}

fn method(m: &mut Model, program: &Program, p: &Procedure) -> Result<Method> {
    let base = format!(
        "{}{}",
        program.type_prefix(),
        p.short_name.to_ascii_lowercase()
    );
    let args_fields = m.struct_fields(&format!("{base}_args")).unwrap_or(&[]);
    let ret_xdr = format!("{base}_ret");
    let ret_fields = m.struct_fields(&ret_xdr);
    // A reply's one bounded list, for hiding counts.
    let lists: Vec<(&Decl, Ty)> = ret_fields
        .unwrap_or(&[])
        .iter()
        .filter_map(|f| m.ty(f).ok().map(|t| (f, t)))
        .filter(|(_, t)| t.owned.starts_with("Vec<") && t.owned != "Vec<u8>")
        .collect();
    let mut params = Vec::new();
    let mut args = Vec::new();
    let mut adds_string_okay = false;
    for f in args_fields {
        let field = names::field(&f.name);
        let keep = find(overrides::KEEP_PARAMS, |r| {
            r.0 == p.full_name && r.1 == f.name
        })
        .is_some();
        let is_count = f.name == "nparams" || f.name.starts_with("max");
        if f.name == "need_results" {
            args.push("1i32".into());
            continue;
        }
        let bound = lists
            .first()
            .filter(|_| lists.len() == 1)
            .and_then(|l| l.1.max.as_ref());
        if let Some(max) = bound.filter(|_| is_count && !keep) {
            args.push(format!("crate::proto::limits::{max} as i32"));
            continue;
        }
        let ty = if let Some((_, _, rust, _)) = find(overrides::PARAM_TYPES, |r| {
            r.0 == p.full_name && r.1 == f.name
        }) {
            Ty {
                owned: (*rust).into(),
                max: None,
                param: (*rust).into(),
            }
        } else if f.name == "flags" && matches!(f.base, Base::UInt) && f.shape == Shape::One {
            let t = m.flags_type(program, &p.short_name);
            Ty {
                owned: t.clone(),
                max: None,
                param: t,
            }
        } else {
            m.ty(f).with_context(|| format!("{base}_args.{}", f.name))?
        };
        let string_okay = f.name == "flags"
            && m.api
                .function_for(&p.short_name, program.name)
                .is_some_and(|(c, _)| m.string_okay.contains(c));
        args.push(match &ty.max {
            Some(max) => {
                format!("crate::proto::xdr::Bounded({field}, crate::proto::limits::{max})")
            }
            None if string_okay => {
                if let Some((c, _)) = m.api.function_for(&p.short_name, program.name) {
                    m.string_okay_used.insert(c.to_string());
                }
                adds_string_okay = true;
                let bits = if ty.owned == "u32" {
                    field.clone()
                } else {
                    format!("{field}.bits()")
                };
                format!("crate::flags::StringOkay({bits})")
            }
            None => field.clone(),
        });
        params.push((field, ty.param));
    }
    let (ret_type, out_type, map) = match ret_fields {
        None => ("()".to_string(), "()".to_string(), None),
        Some(fields) => {
            let ret_type = format!("crate::remote::{}", m.type_name(&ret_xdr));
            let visible: Vec<&Decl> = fields
                .iter()
                .filter(|f| {
                    !(lists.len() == 1
                        && (f.name == "ret" || f.name == "nparams")
                        && matches!(f.base, Base::Int | Base::UInt))
                })
                .collect();
            if visible.len() == 1 && find(overrides::TYPE_NAMES, |r| r.0 == ret_xdr).is_none() {
                let f = visible[0];
                let owned = match find(overrides::FIELD_TYPES, |r| r.0 == ret_xdr && r.1 == f.name)
                {
                    Some((_, _, rust, _)) => (*rust).to_string(),
                    None => m.ty(f)?.owned,
                };
                let owned = qualify(&owned);
                (
                    ret_type,
                    owned,
                    Some(format!("|r| r.{}", names::field(&f.name))),
                )
            } else {
                (ret_type.clone(), ret_type, None)
            }
        }
    };
    let (out_type, map) = match find(overrides::RETURNS, |r| r.0 == p.full_name) {
        Some((_, map, out, _)) => ((*out).to_string(), Some((*map).to_string())),
        None => (out_type, map),
    };
    let params = params.into_iter().map(|(n, t)| (n, qualify(&t))).collect();
    Ok(Method {
        params,
        args,
        ret_type,
        out_type,
        map,
        string_okay: adds_string_okay,
    })
}

/// A type from `types.rs` as seen from `calls.rs` (`Domain` →
/// `crate::remote::Domain`); paths and primitives stay as they are.
fn qualify(ty: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let w = std::mem::take(word);
        let primitive = matches!(
            w.as_str(),
            "" | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "f32"
                | "f64"
                | "bool"
                | "str"
                | "String"
                | "Vec"
                | "Option"
        ) || w.starts_with("crate")
            || w.chars().all(|c| c.is_ascii_digit());
        if !primitive && w.starts_with(|c: char| c.is_ascii_uppercase()) && !out.ends_with("::") {
            out.push_str("crate::remote::");
        }
        out.push_str(&w);
    };
    for c in ty.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

fn calls(m: &mut Model, procedures: &[Procedure]) -> Result<String> {
    let mut out = String::from(
        "//! A method on [`Client`] for every procedure of the remote and QEMU\n\
         //! programs that is a plain call or opens a stream (see the crate's\n\
         //! procedure table for the rest).\n\
         //!\n\
         //! Every method has the same error and cancel behaviour:\n\
         //! [`crate::Error::Libvirt`] with the daemon's error code when it fails\n\
         //! the call; [`crate::Error::Disconnected`] when the link dies;\n\
         //! [`crate::Error::Timeout`] after the handle's call deadline. Dropping\n\
         //! the future abandons the call (the reply is discarded; the daemon may\n\
         //! still carry it out) and the connection stays up.\n\n\
         #![allow(clippy::too_many_arguments, clippy::doc_markdown, clippy::unit_arg)]\n\n\
         use crate::client::Client;\n\
         use crate::error::Result;\n\n\
         impl Client {\n",
    );
    for p in procedures {
        let (name, stream) = match &p.status {
            Status::Method(name) => (name, None),
            Status::StreamCall(name, kind) => (name, Some(*kind)),
            _ => continue,
        };
        let program = m
            .programs
            .iter()
            .find(|g| g.name == p.program)
            .context("program")?;
        let mm = method(m, program, p).with_context(|| p.full_name.clone())?;
        // libvirt's own prose is not copied (see the README's licensing
        // section): the method names its C function and links its docs.
        match m.api.function_for(&p.short_name, program.name) {
            Some((c, f)) => {
                let _ = writeln!(
                    out,
                    "    /// [`{c}`](https://libvirt.org/html/libvirt-{}.html#{c}), through\n    /// `{}` ({}).",
                    f.module, p.full_name, p.number
                );
            }
            None => {
                let _ = writeln!(out, "    /// `{}` ({}).", p.full_name, p.number);
            }
        }
        if mm.string_okay {
            let _ = writeln!(
                out,
                "    ///\n    /// Sends `VIR_TYPED_PARAM_STRING_OKAY` beside `flags`, as libvirt's C\n    /// library does, so the reply keeps its string-valued parameters."
            );
        }
        let params: String = mm
            .params
            .iter()
            .map(|(n, t)| format!(", {n}: {t}"))
            .collect();
        let args = match mm.args.len() {
            0 => "()".to_string(),
            1 => format!("({},)", mm.args[0]),
            _ => format!("({})", mm.args.join(", ")),
        };
        let number = if program.name == "remote" {
            format!("crate::proc_num::{}", p.short_name)
        } else {
            format!("crate::proc_num::{}::{}", program.name, p.short_name)
        };
        let (out_type, body) = match stream {
            None => call_body(program, &number, &args, &mm),
            Some(kind) => {
                if program.name != "remote" {
                    bail!("{}: a stream outside the remote program", p.full_name);
                }
                let _ = writeln!(
                    out,
                    "    ///\n    /// Opens a stream ([`crate::{}`]; see [`crate::stream`] for its rules).",
                    kind.rust().0
                );
                stream_body(kind, &number, &args, &mm).with_context(|| p.full_name.clone())?
            }
        };
        let _ = writeln!(
            out,
            "    pub async fn {name}(&self{params}) -> Result<{out_type}> {{\n{body}\n    }}\n"
        );
    }
    out.push_str("}\n");
    Ok(out)
}

/// The return type and body of a plain call's method.
fn call_body(program: &Program, number: &str, args: &str, mm: &Method) -> (String, String) {
    let call = if program.name == "remote" {
        format!("self.call({number}, &{args})")
    } else {
        format!(
            "self.call_program(crate::proto::limits::{}, crate::proto::limits::{}, {number}, &{args})",
            program.constant("PROGRAM"),
            program.constant("PROTOCOL_VERSION")
        )
    };
    let body = match &mm.map {
        Some(map) => format!(
            "        let ret: {} = {call}.await?;\n        let map: fn({}) -> {} = {map};\n        Ok(map(ret))",
            mm.ret_type, mm.ret_type, mm.out_type
        ),
        None => format!("        {call}.await"),
    };
    (mm.out_type.clone(), body)
}

/// The return type and body of a stream's method: the stream, beside the
/// opening reply's body when it has one.
fn stream_body(
    kind: StreamKind,
    number: &str,
    args: &str,
    mm: &Method,
) -> Result<(String, String)> {
    let (stream, open) = kind.rust();
    let stream = format!("crate::stream::{stream}");
    if mm.ret_type == "()" {
        return Ok((
            stream,
            format!("        self.{open}({number}, &{args}).await"),
        ));
    }
    if kind == StreamKind::Duplex {
        bail!("a duplex stream whose reply has a body");
    }
    let call = format!("self.{open}_with({number}, &{args})");
    let body = match &mm.map {
        Some(map) => format!(
            "        let (ret, stream): ({}, {stream}) = {call}.await?;\n        let map: fn({}) -> {} = {map};\n        Ok((map(ret), stream))",
            mm.ret_type, mm.ret_type, mm.out_type
        ),
        None => format!("        {call}.await"),
    };
    Ok((format!("({}, {stream})", mm.out_type), body))
}

/// The handle types a sweep has samples of (`testing::Samples`' fields).
const SAMPLE_HANDLES: [(&str, &str); 12] = [
    ("Domain", "domain"),
    ("StoragePool", "storage_pool"),
    ("StorageVol", "storage_vol"),
    ("Network", "network"),
    ("NetworkPort", "network_port"),
    ("Interface", "interface"),
    ("NodeDevice", "node_device"),
    ("Secret", "secret"),
    ("Nwfilter", "nwfilter"),
    ("NwfilterBinding", "nwfilter_binding"),
    ("DomainSnapshot", "domain_snapshot"),
    ("DomainCheckpoint", "domain_checkpoint"),
];

/// Procedures the sweep leaves out: they act on the connection itself
/// (polkit's answer also depends on the daemon's authentication state).
const NOT_SWEPT: [&str; 3] = [
    "REMOTE_PROC_CONNECT_OPEN",
    "REMOTE_PROC_CONNECT_CLOSE",
    "REMOTE_PROC_AUTH_POLKIT",
];

/// A sample argument of a parameter type, `None` when there is none.
fn sample(ty: &str) -> Option<String> {
    if let Some(handle) = ty.strip_prefix("&crate::remote::") {
        return SAMPLE_HANDLES
            .iter()
            .find(|(t, _)| *t == handle)
            .map(|(_, field)| format!("&s.{field}"));
    }
    Some(match ty {
        "&str" => "\"\"".into(),
        t if t.starts_with("Option<") => "None".into(),
        t if t.starts_with("&[u8; ") => "&[0; 16]".into(),
        t if t.starts_with("&[") => "&[]".into(),
        "i8" | "i16" | "i32" | "i64" | "u16" | "u32" | "u64" => "0".into(),
        "f32" | "f64" => "0.0".into(),
        "bool" => "false".into(),
        "crate::flags::MetadataType" | "crate::flags::InterfaceAddressesSource" => {
            format!("{ty}::from_wire(0)")
        }
        "crate::domain_state::DrvFeature" => format!("{ty}::from_wire(1)"),
        t if t.starts_with("crate::flags::") => format!("{ty}::empty()"),
        _ => return None,
    })
}

/// `sweep`: every method called once with sample arguments.
fn sweep(m: &mut Model, procedures: &[Procedure]) -> Result<String> {
    let mut out = String::from(
        "//! Every generated method called once with sample arguments (the\n\
         //! sweep test's driver; see `crate::testing::Samples`).\n\n\
         use crate::client::Client;\n\
         use crate::testing::Samples;\n\n\
         /// Calls every generated method that `pick` accepts once (in\n\
         /// procedure order, those that end or remove objects last), with the\n\
         /// samples' handles, empty strings and lists, absent options, zero\n\
         /// numbers and no flags; returns each method's name and outcome (a\n\
         /// stream a method opened is aborted at once). Methods taking a\n\
         /// parameter without a sample are left out.\n\
         pub async fn sweep(\n\
             c: &Client,\n\
             s: &Samples,\n\
             pick: &dyn Fn(&str) -> bool,\n\
         ) -> Vec<(&'static str, crate::Result<()>)> {\n\
         let mut out = Vec::new();\n",
    );
    // What ends or removes the samples goes last, so the rest meet them.
    let last = |p: &&Procedure| {
        let n = p.short_name.as_str();
        [
            "UNDEFINE",
            "DESTROY",
            "SHUTDOWN",
            "DELETE",
            "RESET",
            "SAVE",
            "SUSPEND",
            "REBOOT",
            "CORE_DUMP",
            "MIGRATE",
            "STOP",
        ]
        .iter()
        .any(|w| n.contains(w))
    };
    let ordered = procedures
        .iter()
        .filter(|p| !last(p))
        .chain(procedures.iter().filter(|p| last(p)));
    for p in ordered {
        let (Status::Method(name) | Status::StreamCall(name, _)) = &p.status else {
            continue;
        };
        if NOT_SWEPT.contains(&p.full_name.as_str()) {
            continue;
        }
        let program = m
            .programs
            .iter()
            .find(|g| g.name == p.program)
            .context("program")?;
        let mm = method(m, program, p)?;
        let args: Option<Vec<String>> = mm.params.iter().map(|(_, t)| sample(t)).collect();
        let Some(args) = args else {
            continue;
        };
        let _ = writeln!(
            out,
            "if pick(\"{name}\") {{ out.push((\"{name}\", c.{name}({}).await.map(drop))); }}",
            args.join(", ")
        );
    }
    out.push_str("out\n}\n");
    Ok(out)
}

fn flags(m: &Model) -> Result<String> {
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

fn status_table(procedures: &[Procedure], swept: &Swept) -> String {
    let mut out = "| Program | Number | Procedure | Status |\n|---|---|---|---|\n".to_string();
    for p in procedures {
        let status = match &p.status {
            Status::Method(m) | Status::StreamCall(m, _) => {
                let mut outcome = match swept.test_driver.get(m).map(String::as_str) {
                    Some("answered") => "; swept: answered by the test driver".to_string(),
                    Some(other) => format!(
                        "; swept: the test driver says {}",
                        other.trim_start_matches("libvirt ")
                    ),
                    None => "; not swept".to_string(),
                };
                match swept.qemu.get(m).map(String::as_str) {
                    Some("answered") => outcome.push_str("; answered on `qemu:///system`"),
                    Some(other) => {
                        let _ = write!(
                            outcome,
                            "; `qemu:///system` says {}",
                            other.trim_start_matches("libvirt ")
                        );
                    }
                    None => {}
                }
                let what = match &p.status {
                    Status::StreamCall(_, kind) => {
                        format!("stream ({}), method", kind.rust().0.to_ascii_lowercase())
                    }
                    _ => "method".to_string(),
                };
                format!("{what} [`Client::{m}`](crate::Client::{m}){outcome}")
            }
            Status::StreamMethod(m) => format!("stream, [`Client::{m}`](crate::Client::{m})"),
            Status::EventMessage => "event message, decoded by [`crate::events`]".into(),
            Status::EventRegistration => {
                "event registration, done by [`Client::subscribe`](crate::Client::subscribe)".into()
            }
            Status::Unsupported(why) => format!("unsupported: {why}"),
        };
        let _ = writeln!(
            out,
            "| {} | {} | `{}` | {status} |",
            p.program, p.number, p.full_name
        );
    }
    out
}

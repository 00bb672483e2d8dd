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

use anyhow::{Context, Result, bail};

use super::api_xml::Api;

mod data;
mod methods;
mod params;
mod sweeping;

use super::names;
use super::overrides::{self, find};
use super::xdr_lang::{Base, Decl, Def, Member, Shape, Value};
use data::{flags, limits, proc_num, type_list, types};
use methods::{calls, method};
use sweeping::{status_table, sweep};

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
    files.insert(
        "params.rs".to_string(),
        header.clone() + &params::params(api),
    );
    Ok(files)
}

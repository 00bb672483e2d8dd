//! `calls.rs`: one method per procedure (plain calls and streams).

use std::fmt::Write as _;

use anyhow::{Context, Result, bail};

use super::super::names;
use super::super::overrides::{self, find};
use super::super::xdr_lang::{Base, Decl, Shape};
use super::*;

/// One method's parts.
pub(super) struct Method {
    /// The parameters: (name, Rust type).
    pub(super) params: Vec<(String, String)>,
    /// The arguments' encoded values, in `.x` order.
    args: Vec<String>,
    ret_type: String,
    out_type: String,
    map: Option<String>,
    /// The flags go out with `VIR_TYPED_PARAM_STRING_OKAY` added.
    string_okay: bool,
}

pub(super) fn method(m: &mut Model, program: &Program, p: &Procedure) -> Result<Method> {
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
pub(super) fn qualify(ty: &str) -> String {
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

pub(super) fn calls(m: &mut Model, procedures: &[Procedure]) -> Result<String> {
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
pub(super) fn call_body(
    program: &Program,
    number: &str,
    args: &str,
    mm: &Method,
) -> (String, String) {
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
pub(super) fn stream_body(
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

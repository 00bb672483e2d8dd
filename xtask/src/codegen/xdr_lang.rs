//! A parser for the subset of the XDR language (RFC 4506 §6) that libvirt's
//! `.x` files use: constants, typedefs, enums, structs and discriminated
//! unions, with the `/** ... */` comment before each enum member kept (the
//! procedure enum's annotations live there). `%` lines (rpcgen pass-through
//! C) are skipped.

use anyhow::{Context, Result, bail};

/// A number or the name of a constant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A literal (decimal, hexadecimal or negative).
    Num(i64),
    /// A constant's name (defined in a `.x` file or by libvirt's C headers).
    Name(String),
}

/// A base type as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    Int,
    UInt,
    Hyper,
    UHyper,
    Char,
    UChar,
    Short,
    UShort,
    Float,
    Double,
    Bool,
    String,
    Opaque,
    /// A type declared by name (a typedef, struct, union or enum).
    Named(String),
}

/// How a declaration repeats its base type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// One value.
    One,
    /// `*name`: optional data (zero or one).
    Optional,
    /// `name<MAX>` or `name<>`: variable length, with its maximum if given.
    Var(Option<Value>),
    /// `name[N]`: fixed length.
    Fixed(Value),
}

/// `type name`, `type *name`, `type name<MAX>` or `type name[N]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    pub name: String,
    pub base: Base,
    pub shape: Shape,
}

/// One arm of a union: its case values and its declaration (`None` for
/// `void`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arm {
    pub cases: Vec<Value>,
    pub decl: Option<Decl>,
}

/// An enum member with the comment before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub value: Value,
    pub comment: String,
}

/// A top-level definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Def {
    Const {
        name: String,
        value: Value,
    },
    Typedef(Decl),
    Enum {
        name: String,
        members: Vec<Member>,
    },
    Struct {
        name: String,
        fields: Vec<Decl>,
    },
    Union {
        name: String,
        discriminant: Decl,
        arms: Vec<Arm>,
    },
}

impl Def {
    /// The name it defines.
    pub fn name(&self) -> &str {
        match self {
            Def::Const { name, .. }
            | Def::Enum { name, .. }
            | Def::Struct { name, .. }
            | Def::Union { name, .. } => name,
            Def::Typedef(d) => &d.name,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Num(i64),
    Punct(char),
    /// A `/* ... */` comment's text.
    Comment(String),
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        let c = b[i];
        if c == b'\n' {
            line += 1;
            i += 1;
        } else if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'%' && (i == 0 || b[i - 1] == b'\n') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let end = text[i + 2..]
                .find("*/")
                .with_context(|| format!("line {line}: unterminated comment"))?;
            let body = &text[i + 2..i + 2 + end];
            line += body.matches('\n').count();
            out.push((Tok::Comment(body.to_string()), line));
            i += end + 4;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(text[s..i].to_string()), line));
        } else if c.is_ascii_digit() || (c == b'-' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let s = i;
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            out.push((
                Tok::Num(number(&text[s..i]).with_context(|| format!("line {line}"))?),
                line,
            ));
        } else if "{}()[]<>;,=*:".contains(c as char) {
            out.push((Tok::Punct(c as char), line));
            i += 1;
        } else {
            bail!("line {line}: unexpected character {:?}", c as char);
        }
    }
    Ok(out)
}

fn number(s: &str) -> Result<i64> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16),
        None => digits.parse(),
    }
    .with_context(|| format!("bad number {s:?}"))?;
    Ok(if neg { -v } else { v })
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    /// The last comment skipped over (cleared when a definition uses it).
    comment: String,
}

/// Parses one `.x` file's text into its definitions, in order.
pub fn parse(text: &str) -> Result<Vec<Def>> {
    let mut p = Parser {
        toks: lex(text)?,
        at: 0,
        comment: String::new(),
    };
    let mut defs = Vec::new();
    while p.peek().is_some() {
        defs.push(p.def()?);
    }
    Ok(defs)
}

impl Parser {
    /// The next token that is not a comment (remembering the comment).
    fn peek(&mut self) -> Option<&Tok> {
        while let Some((Tok::Comment(c), _)) = self.toks.get(self.at) {
            self.comment = c.clone();
            self.at += 1;
        }
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn line(&self) -> usize {
        self.toks
            .get(self.at)
            .or(self.toks.last())
            .map_or(0, |(_, l)| *l)
    }

    fn next(&mut self) -> Result<Tok> {
        self.peek();
        let line = self.line();
        let t = self
            .toks
            .get(self.at)
            .map(|(t, _)| t.clone())
            .with_context(|| format!("line {line}: unexpected end of file"))?;
        self.at += 1;
        Ok(t)
    }

    fn ident(&mut self) -> Result<String> {
        match self.next()? {
            Tok::Ident(s) => Ok(s),
            t => bail!("line {}: expected a name, found {t:?}", self.line()),
        }
    }

    fn punct(&mut self, c: char) -> Result<()> {
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => bail!("line {}: expected {c:?}, found {t:?}", self.line()),
        }
    }

    fn is_punct(&mut self, c: char) -> bool {
        matches!(self.peek(), Some(Tok::Punct(p)) if *p == c)
    }

    fn is_ident(&mut self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(i)) if i == s)
    }

    fn value(&mut self) -> Result<Value> {
        match self.next()? {
            Tok::Num(n) => Ok(Value::Num(n)),
            Tok::Ident(s) => Ok(Value::Name(s)),
            t => bail!("line {}: expected a value, found {t:?}", self.line()),
        }
    }

    fn def(&mut self) -> Result<Def> {
        let keyword = self.ident()?;
        let def = match keyword.as_str() {
            "const" => {
                let name = self.ident()?;
                self.punct('=')?;
                Def::Const {
                    name,
                    value: self.value()?,
                }
            }
            "typedef" => Def::Typedef(self.decl()?.context("typedef void")?),
            "enum" => {
                let name = self.ident()?;
                Def::Enum {
                    name,
                    members: self.enum_body()?,
                }
            }
            "struct" => {
                let name = self.ident()?;
                self.punct('{')?;
                let mut fields = Vec::new();
                while !self.is_punct('}') {
                    fields.push(self.decl()?.context("void in a struct")?);
                    self.punct(';')?;
                }
                self.punct('}')?;
                Def::Struct { name, fields }
            }
            "union" => self.union()?,
            other => bail!("line {}: unexpected {other:?}", self.line()),
        };
        self.punct(';')?;
        Ok(def)
    }

    fn enum_body(&mut self) -> Result<Vec<Member>> {
        self.punct('{')?;
        let mut members = Vec::new();
        self.comment.clear();
        loop {
            // The comment just before the member (peeking skips over it).
            self.peek();
            let comment = std::mem::take(&mut self.comment);
            let name = self.ident()?;
            self.punct('=')?;
            let value = self.value()?;
            members.push(Member {
                name,
                value,
                comment,
            });
            if self.is_punct(',') {
                self.punct(',')?;
                if self.is_punct('}') {
                    break;
                }
            } else {
                break;
            }
        }
        self.punct('}')?;
        Ok(members)
    }

    fn union(&mut self) -> Result<Def> {
        let name = self.ident()?;
        if self.ident()? != "switch" {
            bail!("line {}: union {name} without switch", self.line());
        }
        self.punct('(')?;
        let discriminant = self.decl()?.context("void discriminant")?;
        self.punct(')')?;
        self.punct('{')?;
        let mut arms = Vec::new();
        while !self.is_punct('}') {
            let mut cases = Vec::new();
            while self.is_ident("case") {
                self.ident()?;
                cases.push(self.value()?);
                self.punct(':')?;
            }
            if self.is_ident("default") {
                bail!(
                    "line {}: union {name}: a default arm is not supported",
                    self.line()
                );
            }
            if cases.is_empty() {
                bail!("line {}: union {name}: an arm without a case", self.line());
            }
            let decl = self.decl()?;
            self.punct(';')?;
            arms.push(Arm { cases, decl });
        }
        self.punct('}')?;
        Ok(Def::Union {
            name,
            discriminant,
            arms,
        })
    }

    /// A declaration, `None` for `void`.
    fn decl(&mut self) -> Result<Option<Decl>> {
        let first = self.ident()?;
        let base = match first.as_str() {
            "void" => return Ok(None),
            "unsigned" => {
                if self.is_ident("int")
                    || self.is_ident("hyper")
                    || self.is_ident("char")
                    || self.is_ident("short")
                {
                    match self.ident()?.as_str() {
                        "int" => Base::UInt,
                        "hyper" => Base::UHyper,
                        "char" => Base::UChar,
                        _ => Base::UShort,
                    }
                } else {
                    Base::UInt
                }
            }
            "int" => Base::Int,
            "hyper" => Base::Hyper,
            "char" => Base::Char,
            "short" => Base::Short,
            "float" => Base::Float,
            "double" => Base::Double,
            "bool" => Base::Bool,
            "string" => Base::String,
            "opaque" => Base::Opaque,
            "struct" | "enum" | "union" => Base::Named(self.ident()?),
            _ => Base::Named(first),
        };
        let optional = self.is_punct('*');
        if optional {
            self.punct('*')?;
        }
        let name = self.ident()?;
        let shape = if optional {
            Shape::Optional
        } else if self.is_punct('<') {
            self.punct('<')?;
            let max = if self.is_punct('>') {
                None
            } else {
                Some(self.value()?)
            };
            self.punct('>')?;
            Shape::Var(max)
        } else if self.is_punct('[') {
            self.punct('[')?;
            let n = self.value()?;
            self.punct(']')?;
            Shape::Fixed(n)
        } else {
            Shape::One
        };
        Ok(Some(Decl { name, base, shape }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_construct() {
        let defs = parse(
            "%#include <x.h>\n\
             const MAX = 0x10;\n\
             typedef string name_t<MAX>;\n\
             typedef name_t *opt_t;\n\
             typedef opaque uuid_t[16];\n\
             struct s { unsigned hyper a; unsigned b; char c<>; int d[4]; opt_t e; };\n\
             union u switch (int type) { case 1: case 2: double d; case 3: void; };\n\
             enum proc {\n /** @generate: both */\n P_ONE = 1,\n /** @writestream: 1 */\n P_TWO = 2\n};\n",
        )
        .unwrap();
        assert_eq!(defs.len(), 7);
        assert_eq!(
            defs[0],
            Def::Const {
                name: "MAX".into(),
                value: Value::Num(16)
            }
        );
        assert_eq!(
            defs[1],
            Def::Typedef(Decl {
                name: "name_t".into(),
                base: Base::String,
                shape: Shape::Var(Some(Value::Name("MAX".into())))
            })
        );
        let Def::Struct { fields, .. } = &defs[4] else {
            panic!("{:?}", defs[4])
        };
        assert_eq!(fields[0].base, Base::UHyper);
        assert_eq!(fields[1].base, Base::UInt);
        assert_eq!(fields[2].shape, Shape::Var(None));
        assert_eq!(fields[3].shape, Shape::Fixed(Value::Num(4)));
        let Def::Union { arms, .. } = &defs[5] else {
            panic!()
        };
        assert_eq!(arms[0].cases.len(), 2);
        assert_eq!(arms[1].decl, None);
        let Def::Enum { members, .. } = &defs[6] else {
            panic!()
        };
        assert!(members[0].comment.contains("@generate: both"));
        assert!(members[1].comment.contains("@writestream: 1"));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse("const A = 1;\nstruct s { int a }\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
    }
}

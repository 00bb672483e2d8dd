//! OpenSSH client config text into settings, each with the `Host`
//! conditions under which it applies; `Include` files read in place.

use std::path::{Path, PathBuf};

use super::pattern::wildcard;

/// When a setting applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Condition {
    /// Under a `Host` line with these patterns.
    Host(Vec<String>),
    /// Under a `Match` line other than `Match all` (not evaluated: never).
    Match,
}

/// One `Keyword arguments` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Setting {
    /// Every condition must hold (an `Include` inside a `Host` block adds
    /// the included file's own `Host` lines to the outer one).
    pub(crate) conditions: Vec<Condition>,
    /// The keyword, lower case.
    pub(crate) keyword: String,
    /// Its arguments, unquoted.
    pub(crate) args: Vec<String>,
    /// The file and line it came from.
    pub(crate) file: PathBuf,
    /// 1-based.
    pub(crate) line: usize,
}

/// A parse failure: file, line (0 for the file as a whole), reason.
pub(crate) type ParseError = (PathBuf, usize, String);

/// How deeply `Include` may nest (OpenSSH's limit).
const MAX_DEPTH: usize = 16;

/// What reading the config needs from the machine.
pub(crate) trait Files {
    /// The file's text (`NotFound` when absent).
    fn read(&self, path: &Path) -> std::io::Result<String>;
    /// The names in a directory.
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>>;
    /// The user's home directory.
    fn home(&self) -> Option<PathBuf>;
}

/// Splits a line into keyword and arguments: `Keyword value`,
/// `Keyword=value`, double-quoted arguments; `None` for blank lines and
/// comments.
fn tokens(line: &str) -> Result<Option<(String, Vec<String>)>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let keyword = line[..end].to_ascii_lowercase();
    let mut rest = line[end..].trim_start();
    if let Some(r) = rest.strip_prefix('=') {
        rest = r.trim_start();
    }
    let mut args = Vec::new();
    let mut chars = rest.chars().peekable();
    while chars.peek().is_some() {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&first) = chars.peek() else { break };
        if first == '#' {
            break;
        }
        let mut arg = String::new();
        if first == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(c) => arg.push(c),
                    None => return Err("unterminated quote".into()),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                arg.push(c);
                chars.next();
            }
        }
        args.push(arg);
    }
    Ok(Some((keyword, args)))
}

/// `~/` at the start of `path` replaced by the home directory.
pub(crate) fn tilde(path: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    match path.strip_prefix('~') {
        None => Ok(PathBuf::from(path)),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.ok_or("~ used but HOME is not set")?;
            Ok(home.join(rest.trim_start_matches('/')))
        }
        Some(_) => Err(format!("{path}: ~user paths are not supported")),
    }
}

/// Parses `text` (the contents of `file`) under `outer` conditions,
/// appending to `out`; `Include`d files are read through `files`.
pub(crate) fn parse(
    text: &str,
    file: &Path,
    outer: &[Condition],
    depth: usize,
    files: &dyn Files,
    out: &mut Vec<Setting>,
) -> Result<(), ParseError> {
    let fail = |line: usize, reason: String| (file.to_owned(), line, reason);
    let mut conditions = outer.to_vec();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let Some((keyword, args)) = tokens(raw).map_err(|r| fail(line, r))? else {
            continue;
        };
        match keyword.as_str() {
            "host" => {
                if args.is_empty() {
                    return Err(fail(line, "Host needs at least one pattern".into()));
                }
                conditions = outer.to_vec();
                conditions.push(Condition::Host(args));
            }
            "match" => {
                conditions = outer.to_vec();
                let all = args.len() == 1 && args[0].eq_ignore_ascii_case("all");
                if !all {
                    conditions.push(Condition::Match);
                }
            }
            "include" => {
                if depth >= MAX_DEPTH {
                    return Err(fail(
                        line,
                        format!("Include nested deeper than {MAX_DEPTH}"),
                    ));
                }
                for arg in &args {
                    for path in include_paths(arg, files).map_err(|r| fail(line, r))? {
                        let text = match files.read(&path) {
                            Ok(text) => text,
                            // OpenSSH skips a missing include.
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                            Err(e) => return Err((path, 0, e.to_string())),
                        };
                        parse(&text, &path, &conditions, depth + 1, files, out)?;
                    }
                }
            }
            _ => {
                if args.is_empty() {
                    return Err(fail(line, format!("{keyword} needs an argument")));
                }
                out.push(Setting {
                    conditions: conditions.clone(),
                    keyword,
                    args,
                    file: file.to_owned(),
                    line,
                });
            }
        }
    }
    Ok(())
}

/// The files an `Include` argument names: relative paths under `~/.ssh`,
/// `*`/`?` in the file name (not in directories), in lexical order.
fn include_paths(arg: &str, files: &dyn Files) -> Result<Vec<PathBuf>, String> {
    let home = files.home();
    let path = tilde(arg, home.as_deref())?;
    let path = if path.is_absolute() {
        path
    } else {
        home.ok_or("a relative Include needs HOME")?
            .join(".ssh")
            .join(path)
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("Include {arg}: no file name"))?
        .to_owned();
    let dir = path.parent().unwrap_or(Path::new("/")).to_owned();
    if dir.to_string_lossy().contains(['*', '?']) {
        return Err(format!("Include {arg}: wildcards only in the file name"));
    }
    if !name.contains(['*', '?']) {
        return Ok(vec![path]);
    }
    let mut names: Vec<String> = match files.list(&dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(format!("Include {arg}: {e}")),
    };
    names.retain(|n| !n.starts_with('.') && wildcard(&name, n, false));
    names.sort();
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

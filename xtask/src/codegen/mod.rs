//! `cargo xtask codegen libvirt-rpc [--check]`: generates libvirt-rpc's
//! protocol types, procedure numbers, flags and `Client` methods
//! (`libvirt-rpc/src/generated/`) from libvirt's `.x` files and API
//! descriptions, as Debian ships them for the libvirt release the sandbox
//! runs. `--check` writes nothing and fails when the committed files differ
//! from a fresh run (CI runs it).

mod api_xml;
mod client_c;
mod emit;
mod names;
mod overrides;
mod sources;
mod xdr_lang;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::flags::CodegenTarget;
use crate::util::{cmd, run as run_cmd};

/// The sweep test's pinned outcomes, which the status table reports.
const SWEPT: &str = "libvirt-rpc/tests/it/sweep_test_driver.txt";
/// The same for the chosen set swept on `qemu:///system`.
const SWEPT_QEMU: &str = "libvirt-rpc/tests/it/sweep_qemu.txt";

/// `cargo xtask codegen TARGET [--check]`.
pub fn run(target: CodegenTarget, check: bool) -> Result<ExitCode> {
    let CodegenTarget::LibvirtRpc = target;
    let files = generate()?;
    let dir = crate::util::workspace().join("libvirt-rpc/src/generated");
    if check {
        let stale: Vec<&String> = files
            .iter()
            .filter(|(name, text)| {
                std::fs::read_to_string(dir.join(name)).ok().as_deref() != Some(text.as_str())
            })
            .map(|(name, _)| name)
            .collect();
        let extra = committed_extra(&dir, &files)?;
        if stale.is_empty() && extra.is_empty() {
            eprintln!(
                "codegen: libvirt-rpc/src/generated is up to date ({} files)",
                files.len()
            );
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!(
            "codegen: libvirt-rpc/src/generated differs from a fresh run (changed: {stale:?}, not generated: {extra:?}); run `cargo xtask codegen libvirt-rpc` and commit"
        );
        return Ok(ExitCode::FAILURE);
    }
    std::fs::create_dir_all(&dir)?;
    for (name, text) in &files {
        std::fs::write(dir.join(name), text).with_context(|| format!("cannot write {name}"))?;
    }
    for extra in committed_extra(&dir, &files)? {
        std::fs::remove_file(dir.join(&extra))?;
    }
    eprintln!("codegen: wrote {} files to {}", files.len(), dir.display());
    Ok(ExitCode::SUCCESS)
}

/// Files in the directory the generator did not make (left from an older
/// run), except the module file that includes them.
fn committed_extra(dir: &Path, files: &BTreeMap<String, String>) -> Result<Vec<String>> {
    let mut extra = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let name = e?.file_name().to_string_lossy().into_owned();
            if name != "mod.rs" && !files.contains_key(&name) {
                extra.push(name);
            }
        }
    }
    Ok(extra)
}

/// The generated files, formatted: name → text.
fn generate() -> Result<BTreeMap<String, String>> {
    let inputs = sources::ensure()?;
    let mut programs = Vec::new();
    for (name, file) in ["remote", "qemu", "lxc"]
        .into_iter()
        .zip(sources::PROTOCOLS)
    {
        let base = Path::new(file)
            .file_name()
            .context("protocol file")?
            .to_string_lossy();
        let text = sources::read(&inputs, &format!("protocol/{base}"))?;
        let defs = xdr_lang::parse(&text).with_context(|| format!("parsing {base}"))?;
        programs.push(emit::Program { name, defs });
    }
    let mut texts = Vec::new();
    for api in sources::APIS {
        let base = Path::new(api)
            .file_name()
            .context("api file")?
            .to_string_lossy();
        texts.push(sources::read(&inputs, &format!("api/{base}"))?);
    }
    let api = api_xml::Api::parse(&texts.iter().map(String::as_str).collect::<Vec<_>>())?;
    let mut string_okay = std::collections::BTreeSet::new();
    for (name, text) in sources::client_sources(&inputs)? {
        let found = client_c::string_okay_functions(&text);
        if !found.is_empty() {
            eprintln!("codegen: {name} adds VIR_TYPED_PARAM_STRING_OKAY in {found:?}");
        }
        string_okay.extend(found);
    }
    let swept = emit::Swept {
        test_driver: pinned(SWEPT)?,
        qemu: pinned(SWEPT_QEMU)?,
    };
    let files = emit::generate(
        &programs,
        &api,
        &string_okay,
        sources::LIBVIRT_VERSION,
        &swept,
    )?;
    format(files)
}

/// A sweep test's pinned outcomes: method → `answered` or
/// `libvirt <ErrorCode>`.
fn pinned(file: &str) -> Result<BTreeMap<String, String>> {
    let path = crate::util::workspace().join(file);
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(m, o)| (m.to_string(), o.to_string()))
        .collect())
}

/// Runs rustfmt over the Rust files (in a scratch directory), so the
/// committed output reads like the rest of the crate and compares exactly.
fn format(files: BTreeMap<String, String>) -> Result<BTreeMap<String, String>> {
    let scratch = std::env::temp_dir().join(format!("xtask-codegen-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let mut rust: Vec<PathBuf> = Vec::new();
    for (name, text) in &files {
        let path = scratch.join(name);
        std::fs::write(&path, text)?;
        if name.ends_with(".rs") {
            rust.push(path);
        }
    }
    let mut fmt = cmd("rustfmt", ["--edition", "2024", "--config-path"]);
    fmt.arg(crate::util::workspace().join("rustfmt.toml"))
        .args(&rust);
    let result = run_cmd(fmt);
    let mut out = BTreeMap::new();
    for name in files.keys() {
        out.insert(name.clone(), std::fs::read_to_string(scratch.join(name))?);
    }
    let _ = std::fs::remove_dir_all(&scratch);
    result.context("rustfmt of the generated code")?;
    Ok(out)
}

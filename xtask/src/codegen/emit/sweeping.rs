//! `sweep.rs` (every method called once with sample arguments) and the
//! status table of the sweep's pinned outcomes.

use std::fmt::Write as _;

use anyhow::{Context, Result};

use super::*;

/// The handle types a sweep has samples of (`testing::Samples`' fields).
pub(super) const SAMPLE_HANDLES: [(&str, &str); 12] = [
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
pub(super) const NOT_SWEPT: [&str; 3] = [
    "REMOTE_PROC_CONNECT_OPEN",
    "REMOTE_PROC_CONNECT_CLOSE",
    "REMOTE_PROC_AUTH_POLKIT",
];

/// A sample argument of a parameter type, `None` when there is none.
pub(super) fn sample(ty: &str) -> Option<String> {
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
pub(super) fn sweep(m: &mut Model, procedures: &[Procedure]) -> Result<String> {
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

pub(super) fn status_table(procedures: &[Procedure], swept: &Swept) -> String {
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

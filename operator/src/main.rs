//! The egress-proxies operator binary: [`operator::main`] over the provider
//! types of [`operator::registry`] (kvm2).

use std::process::ExitCode;

fn main() -> ExitCode {
    operator::main(std::env::args_os(), operator::registry)
}

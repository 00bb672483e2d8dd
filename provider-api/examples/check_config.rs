//! Validates a providers config file: `cargo run -p provider-api --example check_config -- FILE`.

use provider_api::ProvidersConfig;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check_config FILE");
        std::process::exit(2);
    };
    match ProvidersConfig::load(std::path::Path::new(&path)) {
        Ok(cfg) => println!("ok: {} provider(s)", cfg.providers.len()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}

//! The root tree: mmdebstrap installs the recipe's packages from Debian's
//! archive into a directory, as root, without mounting anything in it.

use std::path::Path;

use anyhow::Result;
use sandbox_kit::guest_recipe::{PACKAGES, VARIANT};

use super::run_logged;
use crate::image::mmdebstrap;

/// Runs mmdebstrap into `tree` (which must not exist yet).
pub fn run(tree: &Path, log: &Path) -> Result<()> {
    run_logged(mmdebstrap::command(VARIANT, PACKAGES, tree), log)
}

//! Configuration files: the sections of the SIL configuration plus the command's own sections,
//! all at the top level. Unknown keys and sections are errors everywhere.

use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use arm_hil::sim::SilConfig;

/// A command's own top-level sections.
pub(crate) trait Sections: DeserializeOwned + Default {
    /// The top-level keys these sections take.
    const KEYS: &'static [&'static str];
}

/// A command with no sections of its own.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoSections {}

impl Sections for NoSections {
    const KEYS: &'static [&'static str] = &[];
}

/// Loads and validates a configuration file, or the defaults without one.
pub(crate) fn load<S: Sections>(path: Option<&Path>) -> anyhow::Result<(SilConfig, S)> {
    let Some(path) = path else { return Ok((SilConfig::default(), S::default())) };
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    SilConfig::with_sections(&text, S::KEYS).with_context(|| format!("configuration {}", path.display()))
}

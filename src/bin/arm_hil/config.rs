//! Configuration files: the sections of the SIL configuration at the top level plus the
//! command's own sections. Unknown keys and sections are errors everywhere.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use arm_hil::sim::SilConfig;

/// A command with no sections of its own.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct NoSections {}

#[derive(Debug, Deserialize)]
struct ConfigFile<Sections> {
    #[serde(flatten)]
    sections: Sections,
    #[serde(flatten)]
    sil: SilConfig,
    /// Top-level keys no section took.
    #[serde(flatten)]
    unknown: BTreeMap<String, serde_norway::Value>,
}

/// Loads and validates a configuration file, or the defaults without one.
pub(crate) fn load<Sections: DeserializeOwned + Default>(path: Option<&Path>) -> anyhow::Result<(SilConfig, Sections)> {
    let Some(path) = path else { return Ok((SilConfig::default(), Sections::default())) };
    let context = || format!("configuration {}", path.display());
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    // An empty document means "all defaults".
    if text.trim().is_empty() {
        return Ok((SilConfig::default(), Sections::default()));
    }
    let file: ConfigFile<Sections> = serde_norway::from_str(&text).with_context(context)?;
    if let Some(key) = file.unknown.keys().next() {
        anyhow::bail!("{}: unknown section `{key}`", context());
    }
    file.sil.validate().with_context(context)?;
    Ok((file.sil, file.sections))
}

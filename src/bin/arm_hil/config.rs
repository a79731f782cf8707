//! Configuration files: the sections of the SIL configuration plus the command's own sections,
//! all at the top level. Unknown keys and sections are errors everywhere.

use std::path::Path;

use anyhow::Context;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_norway::{Mapping, Value};

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
    let context = || format!("configuration {}", path.display());
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let document: Value = serde_norway::from_str(&text).with_context(context)?;
    let mapping = match document {
        // An empty document means "all defaults".
        Value::Null => Mapping::new(),
        Value::Mapping(mapping) => mapping,
        _ => anyhow::bail!("{}: expected a mapping of sections", context()),
    };
    let (mut sil, mut own) = (Mapping::new(), Mapping::new());
    for (key, value) in mapping {
        match key.as_str() {
            Some(name) if SilConfig::SECTIONS.contains(&name) => sil.insert(key, value),
            Some(name) if S::KEYS.contains(&name) => own.insert(key, value),
            _ => anyhow::bail!("{}: unknown section `{}`", context(), serde_norway::to_string(&key)?.trim()),
        };
    }
    let sil: SilConfig = serde_norway::from_value(Value::Mapping(sil)).with_context(context)?;
    sil.validate().with_context(context)?;
    let own = serde_norway::from_value(Value::Mapping(own)).with_context(context)?;
    Ok((sil, own))
}

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
    load_over::<S>(path, &[])
}

/// [`load`], with `defaults` (section, key, value) standing where the file does not set them:
/// a hardware's measured settings (`RigKind::measured_defaults`).
pub(crate) fn load_over<S: Sections>(
    path: Option<&Path>,
    defaults: &[(&str, &str, f64)],
) -> anyhow::Result<(SilConfig, S)> {
    let (text, name) = match path {
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            (text, path.display().to_string())
        }
        None => (String::new(), "(the defaults)".to_owned()),
    };
    let text = with_defaults(&text, defaults).with_context(|| format!("configuration {name}"))?;
    SilConfig::with_sections(&text, S::KEYS).with_context(|| format!("configuration {name}"))
}

/// The YAML `text` with each of `defaults` set where it sets nothing.
fn with_defaults(text: &str, defaults: &[(&str, &str, f64)]) -> anyhow::Result<String> {
    use serde_norway::{Mapping, Value};
    if defaults.is_empty() {
        return Ok(text.to_owned());
    }
    let mut top = match serde_norway::from_str::<Value>(text)? {
        Value::Null => Mapping::new(),
        Value::Mapping(mapping) => mapping,
        _ => anyhow::bail!("expected a mapping of sections"),
    };
    for (section, key, value) in defaults {
        let entry = top.entry(Value::from(*section)).or_insert(Value::Null);
        // An empty section (`estimator:`) is one with every default.
        if entry.is_null() {
            *entry = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(section) = entry else { anyhow::bail!("section `{section}` is not a mapping") };
        section.entry(Value::from(*key)).or_insert(Value::from(*value));
    }
    Ok(serde_norway::to_string(&top)?)
}

#[cfg(test)]
mod tests {
    use super::{load_over, NoSections};

    #[test]
    fn a_hardwares_measured_setting_stands_where_the_file_sets_none_and_the_file_wins() {
        let rig = [("estimator", "sigma_a", 0.5)];
        let (defaults, _) = load_over::<NoSections>(None, &rig).unwrap();
        assert_eq!(defaults.estimator.sigma_a, 0.5);
        let file = std::env::temp_dir().join(format!("arm_hil_config_{}.yaml", std::process::id()));
        std::fs::write(&file, "estimator:\n  sigma_m: 0.001\n").unwrap();
        let (other_key, _) = load_over::<NoSections>(Some(&file), &rig).unwrap();
        assert_eq!((other_key.estimator.sigma_a, other_key.estimator.sigma_m), (0.5, Some(0.001)));
        std::fs::write(&file, "estimator:\n").unwrap();
        assert_eq!(load_over::<NoSections>(Some(&file), &rig).unwrap().0.estimator.sigma_a, 0.5, "an empty section");
        std::fs::write(&file, "estimator:\n  sigma_a: 2.0\n").unwrap();
        let (set, _) = load_over::<NoSections>(Some(&file), &rig).unwrap();
        assert_eq!(set.estimator.sigma_a, 2.0, "the file wins");
        std::fs::remove_file(&file).unwrap();
        assert_eq!(load_over::<NoSections>(None, &[]).unwrap().0.estimator.sigma_a, 2.0, "the simulator's own");
    }
}

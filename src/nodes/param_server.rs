//! What a node answers to `ros2 param`, without ROS: declared parameters with their
//! descriptors, and the rules for setting one while the node runs.
//!
//! Every parameter is either applied at run time (checked against its type and range, then
//! handed to the node, which may still refuse it with a reason) or read-only (read once at start;
//! a set is refused). Nothing is accepted and then ignored.

use std::collections::BTreeMap;

use super::params::ParamValue;

/// The type of a parameter, as rcl_interfaces/ParameterType numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    Bool = 1,
    Integer = 2,
    Double = 3,
    String = 4,
    BoolArray = 6,
    IntegerArray = 7,
    DoubleArray = 8,
    StringArray = 9,
}

impl ParamValue {
    pub fn param_type(&self) -> ParamType {
        match self {
            ParamValue::Bool(_) => ParamType::Bool,
            ParamValue::Integer(_) => ParamType::Integer,
            ParamValue::Double(_) => ParamType::Double,
            ParamValue::String(_) => ParamType::String,
            ParamValue::BoolArray(_) => ParamType::BoolArray,
            ParamValue::IntegerArray(_) => ParamType::IntegerArray,
            ParamValue::DoubleArray(_) => ParamType::DoubleArray,
            ParamValue::StringArray(_) => ParamType::StringArray,
        }
    }
}

/// The closed interval a numeric parameter must lie in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamRange {
    Double { from: f64, to: f64 },
    Integer { from: i64, to: i64 },
}

impl ParamRange {
    fn contains(&self, value: &ParamValue) -> bool {
        match (self, value) {
            (ParamRange::Double { from, to }, ParamValue::Double(v)) => (*from..=*to).contains(v),
            (ParamRange::Integer { from, to }, ParamValue::Integer(v)) => (*from..=*to).contains(v),
            _ => true,
        }
    }
}

impl std::fmt::Display for ParamRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamRange::Double { from, to } => write!(f, "[{from}, {to}]"),
            ParamRange::Integer { from, to } => write!(f, "[{from}, {to}]"),
        }
    }
}

/// What a node says about one of its parameters (or, when `name` ends in '.', about every
/// parameter of that section).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub range: Option<ParamRange>,
    /// Applied while the node runs; otherwise read-only.
    pub runtime: bool,
}

impl ParamSpec {
    /// A parameter (or section) read once at start.
    pub const fn read_only(name: &'static str, description: &'static str) -> ParamSpec {
        ParamSpec { name, description, range: None, runtime: false }
    }

    /// A parameter applied while the node runs.
    pub const fn runtime(name: &'static str, description: &'static str, range: Option<ParamRange>) -> ParamSpec {
        ParamSpec { name, description, range, runtime: true }
    }

    fn covers(&self, name: &str) -> bool {
        match self.name.strip_suffix('.') {
            Some(section) => name.strip_prefix(section).is_some_and(|rest| rest.starts_with('.')),
            None => self.name == name,
        }
    }
}

/// Parameters every ROS node has.
const ROS_SPECS: [ParamSpec; 3] = [
    ParamSpec::read_only("use_sim_time", "follow /clock instead of the system clock (read at start)"),
    ParamSpec::read_only("qos_overrides.", "QoS overrides of publishers and subscriptions (read at start)"),
    ParamSpec::read_only("start_type_description_service", "ROS's type description service (read at start)"),
];

/// How a declared parameter is described to `ros2 param describe`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDescriptor {
    pub param_type: ParamType,
    pub description: String,
    pub read_only: bool,
    pub range: Option<ParamRange>,
}

/// Why a parameter was not set; the text is the reason `ros2 param set` prints.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamRefusal {
    #[error("parameter {0} is not declared by this node")]
    Undeclared(String),
    #[error("parameter {0} is read-only: it is read at start (restart the node to change it)")]
    ReadOnly(String),
    #[error("parameter {name} is of type {expected:?}, got {got:?}")]
    WrongType { name: String, expected: ParamType, got: ParamType },
    #[error("parameter {name} must be in {range}, got {value}")]
    OutOfRange { name: String, range: ParamRange, value: String },
    #[error("parameter {name} refused: {reason}")]
    Refused { name: String, reason: String },
}

#[derive(Debug, Clone, PartialEq)]
struct Declared {
    value: ParamValue,
    descriptor: ParamDescriptor,
}

/// A node's declared parameters and their current values.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParameterServer {
    declared: BTreeMap<String, Declared>,
}

impl ParameterServer {
    /// Declares `values` (what the node started with: parameter files, overrides, and the
    /// defaults it applied), each described by the first of `specs` that covers it; a parameter
    /// no spec covers is read-only.
    pub fn new(values: BTreeMap<String, ParamValue>, specs: &[ParamSpec]) -> ParameterServer {
        let declared = values
            .into_iter()
            .map(|(name, value)| {
                let spec = specs.iter().chain(ROS_SPECS.iter()).find(|spec| spec.covers(&name));
                let descriptor = ParamDescriptor {
                    param_type: value.param_type(),
                    description: spec.map_or("read at start", |spec| spec.description).to_owned(),
                    read_only: !spec.is_some_and(|spec| spec.runtime),
                    range: spec.and_then(|spec| spec.range),
                };
                (name, Declared { value, descriptor })
            })
            .collect();
        ParameterServer { declared }
    }

    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.declared.get(name).map(|declared| &declared.value)
    }

    pub fn describe(&self, name: &str) -> Option<&ParamDescriptor> {
        self.declared.get(name).map(|declared| &declared.descriptor)
    }

    /// The names under `prefixes` (all when empty) at most `depth` levels below them (0: any
    /// depth), and the prefixes of the names found, as rcl_interfaces/ListParameters answers.
    pub fn list(&self, prefixes: &[String], depth: u64) -> (Vec<String>, Vec<String>) {
        let deep_enough = |rest: &str| depth == 0 || (rest.matches('.').count() as u64) < depth;
        let names: Vec<String> = self
            .declared
            .keys()
            .filter(|name| match prefixes.is_empty() {
                true => deep_enough(name),
                false => prefixes.iter().any(|prefix| {
                    *name == prefix
                        || name
                            .strip_prefix(prefix.as_str())
                            .and_then(|rest| rest.strip_prefix('.'))
                            .is_some_and(deep_enough)
                }),
            })
            .cloned()
            .collect();
        let mut found_prefixes: Vec<String> =
            names.iter().filter_map(|name| name.rsplit_once('.').map(|(prefix, _)| prefix.to_owned())).collect();
        found_prefixes.dedup();
        (names, found_prefixes)
    }

    /// The value `value` would be set to: declared, writable, of the declared type (an integer
    /// is taken for a double) and in range. Nothing changes.
    pub fn check(&self, name: &str, value: &ParamValue) -> Result<ParamValue, ParamRefusal> {
        let declared = self.declared.get(name).ok_or_else(|| ParamRefusal::Undeclared(name.to_owned()))?;
        let descriptor = &declared.descriptor;
        if descriptor.read_only {
            return Err(ParamRefusal::ReadOnly(name.to_owned()));
        }
        let value = match (descriptor.param_type, value) {
            (ParamType::Double, ParamValue::Integer(integer)) => ParamValue::Double(*integer as f64),
            (expected, value) if expected != value.param_type() => {
                return Err(ParamRefusal::WrongType { name: name.to_owned(), expected, got: value.param_type() })
            }
            (_, value) => value.clone(),
        };
        match descriptor.range {
            Some(range) if !range.contains(&value) => {
                Err(ParamRefusal::OutOfRange { name: name.to_owned(), range, value: value.to_string() })
            }
            _ => Ok(value),
        }
    }

    /// Checks `value`, hands it to `apply` (the node's own check and use of it), and keeps it
    /// when `apply` accepts it.
    pub fn set(
        &mut self,
        name: &str,
        value: &ParamValue,
        apply: &mut dyn FnMut(&str, &ParamValue) -> Result<(), String>,
    ) -> Result<(), ParamRefusal> {
        let value = self.check(name, value)?;
        apply(name, &value).map_err(|reason| ParamRefusal::Refused { name: name.to_owned(), reason })?;
        if let Some(declared) = self.declared.get_mut(name) {
            declared.value = value;
        }
        Ok(())
    }

    /// Sets `changes` in order after checking every one of them (type, range, read-only), so
    /// that one bad value refuses them all; the node's own `apply` can still refuse one midway.
    pub fn set_atomically(
        &mut self,
        changes: &[(String, ParamValue)],
        apply: &mut dyn FnMut(&str, &ParamValue) -> Result<(), String>,
    ) -> Result<(), ParamRefusal> {
        for (name, value) in changes {
            self.check(name, value)?;
        }
        changes.iter().try_for_each(|(name, value)| self.set(name, value, apply))
    }
}

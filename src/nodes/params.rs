//! ROS parameters to the library's configuration structs, without ROS.
//!
//! ROS flattens nested YAML under `ros__parameters` into dotted names (`controller.kp`). These are
//! rebuilt into a tree and read with serde, so every configuration struct of the library doubles
//! as a parameter schema, with the same defaults and the same refusal of unknown names.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// A parameter value as ROS carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamValue {
    Bool(bool),
    Integer(i64),
    Double(f64),
    String(String),
    BoolArray(Vec<bool>),
    IntegerArray(Vec<i64>),
    DoubleArray(Vec<f64>),
    StringArray(Vec<String>),
}

impl ParamValue {
    pub(crate) fn to_json(&self) -> Value {
        match self {
            ParamValue::Bool(value) => Value::from(*value),
            ParamValue::Integer(value) => Value::from(*value),
            ParamValue::Double(value) => Value::from(*value),
            ParamValue::String(value) => Value::from(value.clone()),
            ParamValue::BoolArray(values) => Value::from(values.clone()),
            ParamValue::IntegerArray(values) => Value::from(values.clone()),
            ParamValue::DoubleArray(values) => Value::from(values.clone()),
            ParamValue::StringArray(values) => Value::from(values.clone()),
        }
    }

    /// A JSON value as a parameter, when ROS can carry it: scalars and arrays of one type.
    fn from_json(value: &Value) -> Option<ParamValue> {
        fn all<T>(items: &[Value], one: impl Fn(&Value) -> Option<T>) -> Option<Vec<T>> {
            items.iter().map(one).collect()
        }
        Some(match value {
            Value::Bool(value) => ParamValue::Bool(*value),
            Value::Number(number) => match number.as_i64() {
                Some(integer) if !number.is_f64() => ParamValue::Integer(integer),
                _ => ParamValue::Double(number.as_f64()?),
            },
            Value::String(value) => ParamValue::String(value.clone()),
            Value::Array(items) => match items.first()? {
                Value::Bool(_) => ParamValue::BoolArray(all(items, Value::as_bool)?),
                Value::Number(first) if !first.is_f64() => ParamValue::IntegerArray(all(items, Value::as_i64)?),
                Value::Number(_) => ParamValue::DoubleArray(all(items, Value::as_f64)?),
                Value::String(_) => ParamValue::StringArray(all(items, |item| item.as_str().map(str::to_owned))?),
                _ => return None,
            },
            Value::Null | Value::Object(_) => return None,
        })
    }
}

/// As `ros2 param` prints values: `true`, `5`, `-5.0`, `text`, `[1.0, 2.0]`.
impl std::fmt::Display for ParamValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParamValue::Bool(value) => write!(f, "{value}"),
            ParamValue::Integer(value) => write!(f, "{value}"),
            ParamValue::Double(value) => write!(f, "{value:?}"),
            ParamValue::String(value) => write!(f, "{value}"),
            ParamValue::BoolArray(values) => write!(f, "{values:?}"),
            ParamValue::IntegerArray(values) => write!(f, "{values:?}"),
            ParamValue::DoubleArray(values) => write!(f, "{values:?}"),
            ParamValue::StringArray(values) => write!(f, "{values:?}"),
        }
    }
}

/// The parameters a configuration struct stands for, under dotted names (the inverse of
/// [`read_group`]): what a node declares, so that `ros2 param list` shows every value in use,
/// defaults included. Values ROS cannot carry (empty arrays, nulls) are left out.
pub fn to_params(config: &impl Serialize) -> BTreeMap<String, ParamValue> {
    fn walk(prefix: &str, value: &Value, out: &mut BTreeMap<String, ParamValue>) {
        match value {
            Value::Object(fields) => {
                for (key, value) in fields {
                    let name = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                    walk(&name, value, out);
                }
            }
            value => {
                if let Some(param) = ParamValue::from_json(value) {
                    out.insert(prefix.to_owned(), param);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(value) = serde_json::to_value(config) {
        walk("", &value, &mut out);
    }
    out
}

/// Why parameters could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error("parameter `{name}` conflicts with `{other}`: one cannot be both a value and a group")]
    Conflict { name: String, other: String },
    #[error("parameters under `{prefix}`: {message}")]
    Invalid { prefix: String, message: String },
}

/// Reads the parameters under `prefix` (a group such as `controller`, or "" for the top level)
/// into `T`. Names outside the group are ignored; names inside it that `T` does not know are an
/// error. Integers are accepted where a float is expected, as a YAML `30` is an integer.
pub fn read_group<T: DeserializeOwned>(params: &BTreeMap<String, ParamValue>, prefix: &str) -> Result<T, ParamError> {
    let mut tree = Map::new();
    for (name, value) in params {
        let relative = match prefix {
            "" => name.as_str(),
            prefix => match name.strip_prefix(prefix).and_then(|rest| rest.strip_prefix('.')) {
                Some(relative) => relative,
                None => continue,
            },
        };
        insert(&mut tree, relative, value.to_json(), name)?;
    }
    serde_json::from_value(Value::Object(tree))
        .map_err(|error| ParamError::Invalid { prefix: prefix.to_owned(), message: error.to_string() })
}

fn insert(tree: &mut Map<String, Value>, path: &str, value: Value, full_name: &str) -> Result<(), ParamError> {
    let conflict = || ParamError::Conflict { name: full_name.to_owned(), other: path.to_owned() };
    match path.split_once('.') {
        None => match tree.get(path) {
            Some(Value::Object(_)) => Err(conflict()),
            _ => {
                tree.insert(path.to_owned(), value);
                Ok(())
            }
        },
        Some((head, rest)) => match tree.entry(head.to_owned()).or_insert_with(|| Value::Object(Map::new())) {
            Value::Object(subtree) => insert(subtree, rest, value, full_name),
            _ => Err(conflict()),
        },
    }
}

/// Keeps only the parameters whose first name component is one of `groups`: what a node reads
/// from a parameter file that configures several nodes, and ROS's own (`use_sim_time`, `qos_overrides`).
pub fn only_groups(params: &BTreeMap<String, ParamValue>, groups: &[&str]) -> BTreeMap<String, ParamValue> {
    params
        .iter()
        .filter(|(name, _)| groups.contains(&name.split('.').next().unwrap_or_default()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Parameters every ROS node has, which no configuration struct reads.
pub const ROS_PARAMETERS: [&str; 3] = ["use_sim_time", "qos_overrides", "start_type_description_service"];

/// The node's own parameters: all but those in `groups` (read into other structs) and ROS's own.
pub fn without_groups(params: &BTreeMap<String, ParamValue>, groups: &[&str]) -> BTreeMap<String, ParamValue> {
    params
        .iter()
        .filter(|(name, _)| {
            let group = name.split('.').next().unwrap_or_default();
            !groups.contains(&group) && !ROS_PARAMETERS.contains(&group)
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

//! A node's parameters declared once: [`node_parameters!`] takes each parameter's name, type,
//! default, description, range and whether it is set at run time, and makes the struct the node
//! reads them into (serde, with its defaults), the table `ros2 param` describes them by
//! ([`ParamSpec`]), and the setter of those set at run time. What a set does beyond changing the
//! value (the STM32's gains go to the firmware) is the node's.

use serde::de::DeserializeOwned;

use super::params::ParamValue;

/// `value` as a field of type `T`, as a parameter file would give it.
pub fn param_as<T: DeserializeOwned>(value: &ParamValue) -> Result<T, String> {
    serde_json::from_value(value.to_json()).map_err(|error| error.to_string())
}

/// Declares a node's parameters:
///
/// ```text
/// node_parameters! {
///     #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
///     pub struct Settings, TABLE {
///         runtime rate_hz: f64 = 250.0, range(ParamRange::Double { from: 0.1, to: 1e4 }) => "samples per second [Hz]";
///         runtime repeat as "loop": bool = false => "start again at the end";
///         read_only frame_id: String = "base_link".into() => "frame of the points";
///         section link: LinkConfig = LinkConfig::default() => "serial link: baud, timeouts";
///         group pid: PidParams = PidParams::default() => "gains";
///     }
///     sections { "robot." => "robot model" }
///     entries { runtime "pid.kp", range(KP) => "proportional gain" }
/// }
/// ```
///
/// `runtime` parameters are set while the node runs (checked against the range first);
/// `read_only` ones are read at start; a `section` is a group of read-only parameters under
/// `name.`; a `group`'s parameters are each described in `entries` (what none of them names is
/// refused as read-only); `sections` lists groups read into other structs. The table is `TABLE`; `Settings::set` applies a runtime parameter's new value.
macro_rules! node_parameters {
    (
        $(#[$meta:meta])*
        pub struct $name:ident, $table:ident {
            $(
                $kind:ident $field:ident $(as $rename:literal)? : $ty:ty = $default:expr
                    $(, range($range:expr))? => $desc:literal;
            )*
        }
        $(sections { $($section:literal => $section_desc:literal),* $(,)? })?
        $(entries { $($entry_kind:ident $entry:literal $(, range($entry_range:expr))? => $entry_desc:literal),* $(,)? })?
    ) => {
        $(#[$meta])*
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $(
                #[doc = $desc]
                $(#[serde(rename = $rename)])?
                pub $field: $ty,
            )*
        }

        impl Default for $name {
            fn default() -> Self {
                $name { $($field: $default,)* }
            }
        }

        /// How `ros2 param` describes the node's parameters.
        /// (A group's entries come first: they are found before the group's catch-all.)
        pub const $table: &[$crate::nodes::param_server::ParamSpec] = &[
            $($($crate::nodes::declare::node_parameters!(@spec $entry_kind, $entry, $entry_desc $(, $entry_range)?),)*)?
            $($crate::nodes::declare::node_parameters!(@spec $kind, $field $($rename)?, $desc $(, $range)?),)*
            $($($crate::nodes::declare::node_parameters!(@spec read_only, $section, $section_desc),)*)?
        ];

        impl $name {
            /// Applies a new value of the runtime parameter `name` (its type and range already
            /// checked); any other parameter is refused.
            pub fn set(&mut self, name: &str, value: &$crate::nodes::params::ParamValue) -> Result<(), String> {
                $(
                    if name == $crate::nodes::declare::node_parameters!(@name $field $($rename)?) {
                        return $crate::nodes::declare::node_parameters!(@set $kind, self.$field, value);
                    }
                )*
                Err(format!("{name} is not applied while the node runs"))
            }
        }
    };
    (@name $field:ident) => { stringify!($field) };
    (@name $field:ident $rename:literal) => { $rename };
    (@range) => { None };
    (@range $range:expr) => { Some($range) };
    (@spec runtime, $field:ident $($rename:literal)?, $desc:literal $(, $range:expr)?) => {
        $crate::nodes::param_server::ParamSpec::runtime(
            $crate::nodes::declare::node_parameters!(@name $field $($rename)?),
            $desc,
            $crate::nodes::declare::node_parameters!(@range $($range)?),
        )
    };
    (@spec runtime, $entry:literal, $desc:literal $(, $range:expr)?) => {
        $crate::nodes::param_server::ParamSpec::runtime($entry, $desc, $crate::nodes::declare::node_parameters!(@range $($range)?))
    };
    (@spec read_only, $field:ident $($rename:literal)?, $desc:literal) => {
        $crate::nodes::param_server::ParamSpec::read_only(
            $crate::nodes::declare::node_parameters!(@name $field $($rename)?),
            concat!($desc, " (read at start)"),
        )
    };
    (@spec read_only, $entry:literal, $desc:literal) => {
        $crate::nodes::param_server::ParamSpec::read_only($entry, concat!($desc, " (read at start)"))
    };
    (@spec section, $field:ident, $desc:literal) => {
        $crate::nodes::param_server::ParamSpec::read_only(concat!(stringify!($field), "."), concat!($desc, " (read at start)"))
    };
    (@spec group, $field:ident, $desc:literal) => {
        $crate::nodes::param_server::ParamSpec::read_only(concat!(stringify!($field), "."), $desc)
    };
    (@set runtime, $target:expr, $value:expr) => {{
        $target = $crate::nodes::declare::param_as($value)?;
        Ok(())
    }};
    (@set $kind:ident, $target:expr, $value:expr) => {{
        let _ = $value;
        Err("it is read at start".to_owned())
    }};
}

pub(crate) use node_parameters;

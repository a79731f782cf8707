//! The parameter services `ros2 param` talks to, over [`crate::nodes::param_server`]. r2r's own
//! handler accepts any value of the right type and has no read-only flag or range, so a node
//! would say "Set parameter successful" and ignore the value; these services answer with the
//! node's own rules instead.

use std::cell::RefCell;
use std::rc::Rc;

use futures::executor::LocalSpawner;
use r2r::rcl_interfaces::msg::{
    FloatingPointRange, IntegerRange, ListParametersResult, ParameterDescriptor, ParameterValue as ValueMsg,
    SetParametersResult,
};
use r2r::rcl_interfaces::srv::{
    DescribeParameters, GetParameterTypes, GetParameters, ListParameters, SetParameters, SetParametersAtomically,
};
use r2r::QosProfile;

use super::serve;

use crate::nodes::param_server::{ParamRange, ParamRefusal, ParameterServer};
use crate::nodes::params::ParamValue;

/// How a node uses a parameter set while it runs: `Err(reason)` refuses it.
pub type Apply = Box<dyn FnMut(&str, &ParamValue) -> Result<(), String>>;

/// For nodes whose parameters are all read-only: the server refuses every set before this.
pub fn nothing_at_run_time() -> Apply {
    Box::new(|name, _| Err(format!("{name} is not applied while the node runs")))
}

/// A parameter value message in the library's form (`None` for NOT_SET and byte arrays).
pub fn from_msg(value: &ValueMsg) -> Option<ParamValue> {
    Some(match value.type_ {
        1 => ParamValue::Bool(value.bool_value),
        2 => ParamValue::Integer(value.integer_value),
        3 => ParamValue::Double(value.double_value),
        4 => ParamValue::String(value.string_value.clone()),
        6 => ParamValue::BoolArray(value.bool_array_value.clone()),
        7 => ParamValue::IntegerArray(value.integer_array_value.clone()),
        8 => ParamValue::DoubleArray(value.double_array_value.clone()),
        9 => ParamValue::StringArray(value.string_array_value.clone()),
        _ => return None,
    })
}

fn to_msg(value: Option<&ParamValue>) -> ValueMsg {
    let mut msg = ValueMsg::default();
    let Some(value) = value else { return msg };
    msg.type_ = value.param_type() as u8;
    match value {
        ParamValue::Bool(v) => msg.bool_value = *v,
        ParamValue::Integer(v) => msg.integer_value = *v,
        ParamValue::Double(v) => msg.double_value = *v,
        ParamValue::String(v) => msg.string_value = v.clone(),
        ParamValue::BoolArray(v) => msg.bool_array_value = v.clone(),
        ParamValue::IntegerArray(v) => msg.integer_array_value = v.clone(),
        ParamValue::DoubleArray(v) => msg.double_array_value = v.clone(),
        ParamValue::StringArray(v) => msg.string_array_value = v.clone(),
    }
    msg
}

fn result(outcome: Result<(), ParamRefusal>) -> SetParametersResult {
    match outcome {
        Ok(()) => SetParametersResult { successful: true, reason: String::new() },
        Err(refusal) => {
            log::warn!("{refusal}");
            SetParametersResult { successful: false, reason: refusal.to_string() }
        }
    }
}

/// A requested parameter as (name, value); unsetting one is refused.
fn change(parameter: &r2r::rcl_interfaces::msg::Parameter) -> Result<(String, ParamValue), ParamRefusal> {
    match from_msg(&parameter.value) {
        Some(value) => Ok((parameter.name.clone(), value)),
        None => Err(ParamRefusal::Refused { name: parameter.name.clone(), reason: "cannot be unset".into() }),
    }
}

fn describe(server: &ParameterServer, name: &str) -> ParameterDescriptor {
    let mut descriptor = ParameterDescriptor { name: name.to_owned(), ..Default::default() };
    if let Some(described) = server.describe(name) {
        descriptor.type_ = described.param_type as u8;
        descriptor.description = described.description.clone();
        descriptor.read_only = described.read_only;
        match described.range {
            Some(ParamRange::Double { from, to }) => {
                descriptor.floating_point_range = vec![FloatingPointRange { from_value: from, to_value: to, step: 0.0 }]
            }
            Some(ParamRange::Integer { from, to }) => {
                descriptor.integer_range = vec![IntegerRange { from_value: from, to_value: to, step: 0 }]
            }
            None => {}
        }
    }
    descriptor
}

/// Creates the node's six parameter services (~/set_parameters, ...), handled on `spawner`.
/// A value that passes the server's checks is handed to `apply` before it is kept. Follows
/// /clock when `use_sim_time` is declared true (r2r's own handler, not used here, would).
pub fn serve_parameters(
    node: &mut r2r::Node,
    spawner: &LocalSpawner,
    server: ParameterServer,
    apply: Apply,
) -> anyhow::Result<()> {
    // r2r's doc-only bindings (CI's type-check) leave out the time source.
    #[cfg(not(feature = "ros-doc-only"))]
    if server.get("use_sim_time") == Some(&ParamValue::Bool(true)) {
        node.get_time_source().enable_sim_time(node)?;
    }
    // The services run on the spinning thread only.
    let server = Rc::new(RefCell::new(server));
    let apply = Rc::new(RefCell::new(apply));
    let qos = QosProfile::services_default;
    let service = |suffix: &str| format!("~/{suffix}");

    let (state, use_value) = (server.clone(), apply.clone());
    serve(
        spawner,
        node.create_service::<SetParameters::Service>(&service("set_parameters"), qos())?,
        move |request| {
            let (mut server, mut apply) = (state.borrow_mut(), use_value.borrow_mut());
            let results = request
                .parameters
                .iter()
                .map(|p| result(change(p).and_then(|(name, value)| server.set(&name, &value, &mut *apply))))
                .collect();
            SetParameters::Response { results }
        },
    )?;

    let (state, use_value) = (server.clone(), apply);
    serve(
        spawner,
        node.create_service::<SetParametersAtomically::Service>(&service("set_parameters_atomically"), qos())?,
        move |request| {
            let (mut server, mut apply) = (state.borrow_mut(), use_value.borrow_mut());
            let outcome = request
                .parameters
                .iter()
                .map(change)
                .collect::<Result<Vec<_>, _>>()
                .and_then(|changes| server.set_atomically(&changes, &mut *apply));
            SetParametersAtomically::Response { result: result(outcome) }
        },
    )?;

    let state = server.clone();
    serve(
        spawner,
        node.create_service::<GetParameters::Service>(&service("get_parameters"), qos())?,
        move |request| {
            let server = state.borrow();
            GetParameters::Response { values: request.names.iter().map(|name| to_msg(server.get(name))).collect() }
        },
    )?;

    let state = server.clone();
    serve(
        spawner,
        node.create_service::<GetParameterTypes::Service>(&service("get_parameter_types"), qos())?,
        move |request| {
            let server = state.borrow();
            let types = request.names.iter().map(|name| server.get(name).map_or(0, |v| v.param_type() as u8)).collect();
            GetParameterTypes::Response { types }
        },
    )?;

    let state = server.clone();
    serve(
        spawner,
        node.create_service::<ListParameters::Service>(&service("list_parameters"), qos())?,
        move |request| {
            let server = state.borrow();
            let (names, prefixes) = server.list(&request.prefixes, request.depth);
            ListParameters::Response { result: ListParametersResult { names, prefixes } }
        },
    )?;

    let state = server;
    serve(
        spawner,
        node.create_service::<DescribeParameters::Service>(&service("describe_parameters"), qos())?,
        move |request| {
            let server = state.borrow();
            DescribeParameters::Response { descriptors: request.names.iter().map(|n| describe(&server, n)).collect() }
        },
    )?;
    Ok(())
}

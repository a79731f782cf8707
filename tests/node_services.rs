//! What the nodes answer to `ros2 param` and report on /diagnostics, tested without ROS.

use std::collections::BTreeMap;

use arm_hil::drivers::rdscom::RdscomLinkState;
use arm_hil::drivers::stm32::LinkState;
use arm_hil::nodes::link_health::{LinkCondition, LinkReport};
use arm_hil::nodes::param_server::{ParamRange, ParamRefusal, ParamType, ParameterServer};
use arm_hil::nodes::params::{to_params, ParamValue};
use arm_hil::nodes::sil::{sil_node_config, SilNodeSettings, SIL_NODE_PARAMS};
use arm_hil::nodes::status::{Level, Schedule, Status};
use arm_hil::nodes::stm32::{Stm32NodeConfig, STM32_NODE_PARAMS};
use arm_hil::sim::SilConfig;

fn sil_node_server() -> ParameterServer {
    let mut declared = to_params(&SilConfig::default());
    declared.extend(to_params(&SilNodeSettings::default()));
    declared.insert("use_sim_time".into(), ParamValue::Bool(false));
    ParameterServer::new(declared, SIL_NODE_PARAMS)
}

fn apply_to(settings: &mut SilNodeSettings) -> impl FnMut(&str, &ParamValue) -> Result<(), String> + '_ {
    move |name, value| settings.set(name, value)
}

#[test]
fn sil_node_declares_every_setting_in_use_defaults_included() {
    let server = sil_node_server();
    for name in [
        "publish_rate_hz",
        "real_time_factor",
        "loop",
        "controller.kp",
        "integrator.dt_max",
        "robot.elbow",
        "run.frame_rate_hz",
    ] {
        assert!(server.get(name).is_some(), "{name} is not declared");
    }
    assert!(server.describe("run.frame_rate_hz").unwrap().description.contains("frame_rate_hz"));
    assert_eq!(server.get("controller.kp"), Some(&ParamValue::Double(900.0)));
    assert_eq!(server.get("robot.elbow"), Some(&ParamValue::DoubleArray(vec![0.35, 0.35, 0.0])));
    // What is declared reads back into the same configuration.
    let declared: BTreeMap<String, ParamValue> =
        server.list(&[], 0).0.into_iter().map(|name| (name.clone(), server.get(&name).unwrap().clone())).collect();
    assert_eq!(sil_node_config(&declared).unwrap(), (SilConfig::default(), SilNodeSettings::default()));
}

#[test]
fn a_runtime_parameter_is_applied_after_its_checks() {
    let mut server = sil_node_server();
    let mut settings = SilNodeSettings::default();
    server.set("publish_rate_hz", &ParamValue::Double(100.0), &mut apply_to(&mut settings)).unwrap();
    assert_eq!(settings.publish_rate_hz, 100.0);
    assert_eq!(server.get("publish_rate_hz"), Some(&ParamValue::Double(100.0)));
    // An integer is taken for a double, as `ros2 param set ... 50` sends one.
    server.set("publish_rate_hz", &ParamValue::Integer(50), &mut apply_to(&mut settings)).unwrap();
    assert_eq!(settings.publish_rate_hz, 50.0);
    server.set("loop", &ParamValue::Bool(false), &mut apply_to(&mut settings)).unwrap();
    assert!(!settings.repeat);
}

#[test]
fn bad_values_are_refused_with_the_reason_and_change_nothing() {
    let mut server = sil_node_server();
    let mut settings = SilNodeSettings::default();
    let refusal = server.set("publish_rate_hz", &ParamValue::Double(-5.0), &mut apply_to(&mut settings)).unwrap_err();
    assert!(matches!(refusal, ParamRefusal::OutOfRange { .. }), "{refusal}");
    assert_eq!(refusal.to_string(), "parameter publish_rate_hz must be in [0.1, 10000], got -5.0");
    let refusal = server.set("real_time_factor", &ParamValue::String("fast".into()), &mut apply_to(&mut settings));
    assert!(matches!(refusal, Err(ParamRefusal::WrongType { expected: ParamType::Double, .. })));
    let refusal = server.set("no_such_parameter", &ParamValue::Bool(true), &mut apply_to(&mut settings));
    assert!(matches!(refusal, Err(ParamRefusal::Undeclared(_))));
    assert_eq!(settings, SilNodeSettings::default());
    assert_eq!(server.get("publish_rate_hz"), Some(&ParamValue::Double(250.0)));
}

#[test]
fn start_up_parameters_are_read_only_and_a_set_is_refused() {
    let mut server = sil_node_server();
    let mut settings = SilNodeSettings::default();
    for name in ["integrator.dt_max", "controller.kp", "trajectory_file", "use_sim_time"] {
        let value = server.get(name).unwrap().clone();
        let refusal = server.set(name, &value, &mut apply_to(&mut settings)).unwrap_err();
        assert_eq!(refusal, ParamRefusal::ReadOnly(name.into()));
        assert!(refusal.to_string().contains("read-only"));
        assert!(server.describe(name).unwrap().read_only);
    }
}

#[test]
fn descriptors_carry_type_description_and_range() {
    let server = sil_node_server();
    let rate = server.describe("publish_rate_hz").unwrap();
    assert_eq!(rate.param_type, ParamType::Double);
    assert!(!rate.read_only);
    assert!(rate.description.contains("[Hz]"));
    assert_eq!(rate.range, Some(ParamRange::Double { from: 0.1, to: 10000.0 }));
    let kp = server.describe("controller.kp").unwrap();
    assert!(kp.read_only && kp.description.contains("read at start"));
}

#[test]
fn an_atomic_set_with_one_bad_value_sets_none() {
    let mut server = sil_node_server();
    let mut settings = SilNodeSettings::default();
    let changes = [
        ("publish_rate_hz".to_owned(), ParamValue::Double(100.0)),
        ("real_time_factor".to_owned(), ParamValue::Double(-1.0)),
    ];
    assert!(server.set_atomically(&changes, &mut apply_to(&mut settings)).is_err());
    assert_eq!(settings, SilNodeSettings::default());
}

#[test]
fn listing_follows_prefixes_and_depth() {
    let server = sil_node_server();
    let (names, prefixes) = server.list(&["controller".into()], 0);
    assert!(names.iter().all(|name| name.starts_with("controller.")) && names.contains(&"controller.kp".into()));
    assert_eq!(prefixes, ["controller"]);
    let (top, _) = server.list(&[], 1);
    assert!(top.contains(&"publish_rate_hz".into()) && !top.iter().any(|name| name.contains('.')));
}

#[test]
fn stm32_gains_are_applied_within_the_documented_ranges() {
    let mut declared = to_params(&Stm32NodeConfig::default());
    declared.insert("use_sim_time".into(), ParamValue::Bool(false));
    let server = ParameterServer::new(declared, STM32_NODE_PARAMS);
    assert!(server.check("pid.elbow.kp", &ParamValue::Double(5.0)).is_ok());
    assert!(matches!(server.check("pid.elbow.ki", &ParamValue::Double(1.5)), Err(ParamRefusal::OutOfRange { .. })));
    assert!(server.check("mode", &ParamValue::String("idle".into())).is_ok());
    assert_eq!(server.check("port", &ParamValue::String("/dev/x".into())), Err(ParamRefusal::ReadOnly("port".into())));
    assert!(server.describe("link.baud").unwrap().read_only);
}

#[test]
fn diagnostics_are_due_every_second_of_the_stamps_axis_and_at_once_on_a_change() {
    const MS: u64 = 1_000_000;
    let mut schedule = Schedule::every_second();
    let mut status = Status::new("sil_node: run", "sil");
    let start = 5_000 * MS;
    assert!(schedule.due(&status, start));
    assert!(!schedule.due(&status, start + 500 * MS));
    assert!(schedule.due(&status, start + 1000 * MS));
    status.set(Level::Error, "run stopped", Vec::new());
    assert!(schedule.due(&status, start + 1100 * MS));
    status.values.push(("frames".into(), "10".into()));
    assert!(!schedule.due(&status, start + 1200 * MS), "values alone are not a change of state");
    assert!(schedule.due(&status, start), "time that goes back starts over");
}

#[test]
fn link_health_levels_mean_what_they_say_and_count_reconnects() {
    let mut health = LinkReport::default();
    assert_eq!((health.condition, health.level()), (LinkCondition::Waiting, Level::Warn));
    health.changed(LinkState::Connected);
    assert_eq!(health.level(), Level::Ok);
    health.changed(LinkState::Degraded);
    assert_eq!(health.level(), Level::Warn);
    health.changed(LinkState::Disconnected);
    assert_eq!(health.level(), Level::Error);
    health.changed(LinkState::Connected);
    health.changed(RdscomLinkState::Lost);
    health.changed(RdscomLinkState::Up);
    assert_eq!(health.reconnects, 2);
    health.failed_request("request 1 #4 got no acknowledgement".into());
    let mut status = Status::new("arduino_driver: link", "/dev/ttyACM0");
    health.report(&mut status);
    assert_eq!((status.level, status.message.as_str()), (Level::Ok, "connected"));
    let value = |key: &str| status.values.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    assert_eq!(value("failed_requests").as_deref(), Some("1"));
    assert_eq!(value("reconnects").as_deref(), Some("2"));
}

#[test]
fn a_parameter_declared_once_gives_its_field_default_description_range_and_setter() {
    let spec = |name: &str| *SIL_NODE_PARAMS.iter().find(|spec| spec.name == name).unwrap();
    assert!(spec("loop").runtime && spec("real_time_factor").runtime);
    assert!(!spec("frame_id").runtime && spec("frame_id").description.ends_with("(read at start)"));
    assert_eq!(spec("publish_rate_hz").range, Some(ParamRange::Double { from: 0.1, to: 10000.0 }));
    assert!(spec("robot.").description.contains("examples/sil.yaml"));
    // A section (`constraints.`) describes every parameter under it.
    let described = |name: &str| {
        SIL_NODE_PARAMS.iter().any(|spec| spec.name == name || spec.name.ends_with('.') && name.starts_with(spec.name))
    };
    for name in to_params(&SilNodeSettings::default()).keys() {
        assert!(described(name), "{name} is in the table");
    }
    let mut settings = SilNodeSettings::default();
    assert_eq!((settings.publish_rate_hz, settings.repeat, settings.frame_id.as_str()), (250.0, true, "base_link"));
    settings.set("loop", &ParamValue::Bool(false)).unwrap();
    settings.set("publish_rate_hz", &ParamValue::Integer(100)).unwrap();
    assert_eq!((settings.repeat, settings.publish_rate_hz), (false, 100.0));
    assert!(settings.set("frame_id", &ParamValue::String("map".into())).is_err(), "read at start");
    assert!(settings.set("loop", &ParamValue::String("yes".into())).is_err(), "the field's type");

    // A group's entries come before its catch-all: each gain is set at run time, with its range.
    let server = ParameterServer::new(to_params(&Stm32NodeConfig::default()), STM32_NODE_PARAMS);
    let gain = server.describe("pid.elbow.kd").unwrap();
    assert!(!gain.read_only && gain.range == Some(ParamRange::Double { from: 0.0, to: 2.0 }));
    assert!(server.describe("link.baud").unwrap().read_only);
}

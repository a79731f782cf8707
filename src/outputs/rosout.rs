//! /rosout: a log line as a node publishes it (rcl_interfaces/Log), and the QoS rcl gives the
//! topic. The ROS nodes and the live view build their lines here.

use std::time::Duration;

use super::sink::{Durability, Qos};
use crate::msg::{Log, Time};

/// rcl's /rosout: reliable, transient local, the last 1000 lines.
pub const QOS: Qos = Qos { depth: 1000, durability: Durability::TransientLocal };

/// How long rcl keeps a /rosout line for late subscribers.
pub const LIFESPAN: Duration = Duration::from_secs(10);

/// rcl_interfaces/Log's level of a `log` record's.
pub fn level(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 40,
        log::Level::Warn => 30,
        log::Level::Info => 20,
        log::Level::Debug | log::Level::Trace => 10,
    }
}

/// The /rosout line of `record`, logged at `now_ns` by the node `name`.
pub fn log_line(now_ns: u64, name: &str, record: &log::Record) -> Log {
    Log {
        stamp: Time::from_nanos(now_ns),
        level: level(record.level()),
        name: name.to_owned(),
        msg: record.args().to_string(),
        file: record.file().unwrap_or("").to_owned(),
        function: record.module_path().unwrap_or("").to_owned(),
        line: record.line().unwrap_or(0),
    }
}

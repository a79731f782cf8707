//! The `log` macros of a running node go through ROS logging under the node's name: to the
//! console as ROS formats it (rcutils; the level is ROS's, `--ros-args --log-level debug`), and
//! to /rosout, so rqt_console and `ros2 bag record /rosout` see them.
//!
//! Since Humble, rcl_node_init no longer creates a node's /rosout publisher: the client library
//! does (rclcpp and rclpy call rcl_logging_rosout_init_publisher_for_node). r2r 0.9 does not,
//! and keeps the rcl node handle to itself, so rcutils' rosout handler finds no publisher for
//! the node. The node therefore publishes rcl_interfaces/Log on /rosout itself, with the QoS
//! rcl gives /rosout, for records at Info and above.

use std::sync::{Mutex, OnceLock};

use r2r::{LogSeverity, PublisherUntyped};

use super::qos_profile;
use crate::msg::cdr::encode_into;
use crate::msg::{Log, RosMessage};
use crate::outputs::{rosout, wall_clock_ns};

struct RosLogger {
    /// The node's logger name, as rcl names it.
    name: String,
    /// Set once the node exists, with a buffer for the line's CDR. A publisher is Send but not
    /// Sync, hence the lock.
    rosout: OnceLock<Mutex<(PublisherUntyped, Vec<u8>)>>,
}

static LOGGER: OnceLock<RosLogger> = OnceLock::new();

impl log::Log for RosLogger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let severity = match record.level() {
            log::Level::Error => LogSeverity::Error,
            log::Level::Warn => LogSeverity::Warn,
            log::Level::Info => LogSeverity::Info,
            log::Level::Debug | log::Level::Trace => LogSeverity::Debug,
        };
        let mut line = rosout::log_line(wall_clock_ns(), &self.name, record);
        line.msg = line.msg.replace('\0', "\\0");
        r2r::log(&line.msg, &self.name, &line.file, line.line, severity);
        if record.level() > log::Level::Info {
            return;
        }
        // try_lock: a failure to publish is itself logged; it must not wait for this lock.
        let Some(Ok(mut rosout)) = self.rosout.get().map(Mutex::try_lock) else { return };
        let (publisher, cdr) = &mut *rosout;
        if encode_into(&line, cdr).is_ok() {
            let _ = publisher.publish_raw(cdr);
        }
    }

    fn flush(&self) {}
}

/// Routes the `log` macros to ROS logging as `node_name`. Debug records reach rcutils, which
/// drops them below the logger's level; trace records are left out.
pub fn install(node_name: &str) {
    let logger = LOGGER.get_or_init(|| RosLogger { name: node_name.to_owned(), rosout: OnceLock::new() });
    if log::set_logger(logger).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}

/// From now on, log records also go to /rosout with rcl's QoS for it.
pub fn publish_to_rosout(node: &mut r2r::Node) -> r2r::Result<()> {
    let qos = qos_profile(rosout::QOS).lifespan(rosout::LIFESPAN);
    let publisher = node.create_publisher_untyped("/rosout", Log::DEF.name, qos)?;
    if let Some(logger) = LOGGER.get() {
        let _ = logger.rosout.set(Mutex::new((publisher, Vec::with_capacity(256))));
    }
    Ok(())
}

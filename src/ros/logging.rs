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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use r2r::rcl_interfaces::msg::Log;
use r2r::{LogSeverity, Publisher, QosProfile};

struct RosLogger {
    /// The node's logger name, as rcl names it.
    name: String,
    /// Set once the node exists. A publisher is Send but not Sync, hence the lock.
    rosout: OnceLock<Mutex<Publisher<Log>>>,
}

static LOGGER: OnceLock<RosLogger> = OnceLock::new();

/// rcl_interfaces/Log levels.
fn rosout_level(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 40,
        log::Level::Warn => 30,
        log::Level::Info => 20,
        log::Level::Debug | log::Level::Trace => 10,
    }
}

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
        let message = record.args().to_string().replace('\0', "\\0");
        let (file, line) = (record.file().unwrap_or(""), record.line().unwrap_or(0));
        r2r::log(&message, &self.name, file, line, severity);
        if record.level() > log::Level::Info {
            return;
        }
        // try_lock: a failure to publish is itself logged; it must not wait for this lock.
        let Some(Ok(rosout)) = self.rosout.get().map(Mutex::try_lock) else { return };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let _ = rosout.publish(&Log {
            stamp: r2r::Clock::to_builtin_time(&now),
            level: rosout_level(record.level()),
            name: self.name.clone(),
            msg: message,
            file: file.to_owned(),
            function: record.module_path().unwrap_or("").to_owned(),
            line,
        });
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

/// From now on, log records also go to /rosout (reliable, transient local, the last 1000, each
/// kept 10 s: rcl's /rosout QoS).
pub fn publish_to_rosout(node: &mut r2r::Node) -> r2r::Result<()> {
    let qos = QosProfile::default().keep_last(1000).reliable().transient_local().lifespan(Duration::from_secs(10));
    let publisher = node.create_publisher::<Log>("/rosout", qos)?;
    if let Some(logger) = LOGGER.get() {
        let _ = logger.rosout.set(Mutex::new(publisher));
    }
    Ok(())
}

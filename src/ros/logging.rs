//! The `log` macros of a running node go through ROS logging (rcutils), under the node's name:
//! to the console as ROS formats it, and to /rosout (rcl attaches its rosout handler when r2r
//! creates the context and the node), so rqt_console and `ros2 bag record /rosout` see them.
//! The level is ROS's: `--ros-args --log-level debug`.

use r2r::LogSeverity;

struct RosLogger {
    /// The node's logger name, as rcl names it.
    name: String,
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
        r2r::log(&message, &self.name, record.file().unwrap_or(""), record.line().unwrap_or(0), severity);
    }

    fn flush(&self) {}
}

/// Routes the `log` macros to ROS logging as `node_name`. Debug records reach rcutils, which
/// drops them below the logger's level; trace records are left out.
pub fn install(node_name: &str) {
    if log::set_boxed_logger(Box::new(RosLogger { name: node_name.to_owned() })).is_ok() {
        log::set_max_level(log::LevelFilter::Debug);
    }
}

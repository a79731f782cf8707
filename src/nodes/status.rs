//! What a node reports on /diagnostics, without ROS: one status, published once a second (as
//! diagnostic_updater does) and at once when its level or message changes.

/// diagnostic_msgs/DiagnosticStatus levels. A node that does its job within its targets is OK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Ok = 0,
    Warn = 1,
    Error = 2,
    Stale = 3,
}

/// One diagnostic_msgs/DiagnosticStatus.
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub level: Level,
    /// "node: what", as diagnostic_aggregator groups it.
    pub name: String,
    pub message: String,
    pub hardware_id: String,
    pub values: Vec<(String, String)>,
}

impl Status {
    pub fn new(name: &str, hardware_id: &str) -> Status {
        Status {
            level: Level::Ok,
            name: name.to_owned(),
            message: "starting".to_owned(),
            hardware_id: hardware_id.to_owned(),
            values: Vec::new(),
        }
    }

    /// Sets level, message and values at once.
    pub fn set(&mut self, level: Level, message: impl Into<String>, values: Vec<(&str, String)>) {
        self.level = level;
        self.message = message.into();
        self.values = values.into_iter().map(|(key, value)| (key.to_owned(), value)).collect();
    }
}

/// When a report is due: a period after it was last published, or at once when its state or
/// message changes (a status's level and message; a link's condition and last error). Time is
/// the node's stamps' axis [ns], as diagnostic_updater times itself on the node's clock; time
/// that goes back (a replay that starts over) makes a report due.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    period_ns: u64,
    last: Option<(u64, u8, String)>,
}

impl Schedule {
    /// Once a second, as diagnostic_updater publishes.
    pub fn every_second() -> Schedule {
        Schedule { period_ns: 1_000_000_000, last: None }
    }

    /// True when `status` is to be published at `now_ns`; it is then taken as published.
    pub fn due(&mut self, status: &Status, now_ns: u64) -> bool {
        self.due_on(status.level as u8, &status.message, now_ns)
    }

    /// True when a report in `state` with `message` is to be published at `now_ns`; it is then
    /// taken as published.
    pub fn due_on(&mut self, state: u8, message: &str, now_ns: u64) -> bool {
        let due = match &self.last {
            None => true,
            Some((sent, last_state, last_message)) => {
                now_ns < *sent || now_ns - sent >= self.period_ns || *last_state != state || last_message != message
            }
        };
        if due {
            self.sent(state, message, now_ns);
        }
        due
    }

    /// A report in `state` with `message` went out at `now_ns`: the next is due a period later.
    pub fn sent(&mut self, state: u8, message: &str, now_ns: u64) {
        self.last = Some((now_ns, state, message.to_owned()));
    }
}

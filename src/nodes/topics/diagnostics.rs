//! A node's [`Status`] on /diagnostics: as published when the node says ([`StatusTopic`]), or
//! on the node's [`Schedule`] ([`Diagnostics`]): once a second and at once on a change of level
//! or message.

use crate::msg::{DiagnosticArray, DiagnosticStatus, Header, KeyValue};
use crate::nodes::status::{Level, Schedule, Status};
use crate::outputs::{Outputs, Publisher, Qos, Sink, SinkError, Topic};

/// /diagnostics as diagnostic_updater offers it: the last 10.
const QOS: Qos = Qos::STREAM;

/// A /diagnostics message holding `status`.
pub fn diagnostic_array(time_ns: u64, status: &Status) -> DiagnosticArray {
    DiagnosticArray {
        header: Header::at(time_ns, ""),
        status: vec![DiagnosticStatus {
            level: status.level as u8,
            name: status.name.clone(),
            message: status.message.clone(),
            hardware_id: status.hardware_id.clone(),
            values: status
                .values
                .iter()
                .map(|(key, value)| KeyValue { key: key.clone(), value: value.clone() })
                .collect(),
        }],
    }
}

/// /diagnostics on one sink.
#[derive(Debug, Clone, Copy)]
pub struct StatusTopic(Topic<DiagnosticArray>);

impl StatusTopic {
    pub fn advertise<S: Sink>(out: &mut Outputs<S>) -> Result<StatusTopic, SinkError> {
        Ok(StatusTopic(out.topic("/diagnostics", QOS)?))
    }

    /// Publishes `status` at `time_ns`.
    pub fn publish<S: Sink>(&self, out: &mut Outputs<S>, time_ns: u64, status: &Status) -> Result<(), SinkError> {
        out.publish(self.0, time_ns, &diagnostic_array(time_ns, status))
    }
}

/// A node's status and when it is next due on /diagnostics.
#[derive(Debug)]
pub struct Diagnostics {
    topic: StatusTopic,
    status: Status,
    schedule: Schedule,
}

impl Diagnostics {
    /// Advertises /diagnostics, the node's status starting as `status`.
    pub fn advertise<S: Sink>(out: &mut Outputs<S>, status: Status) -> Result<Diagnostics, SinkError> {
        Ok(Diagnostics { topic: StatusTopic::advertise(out)?, status, schedule: Schedule::every_second() })
    }

    pub fn status(&self) -> &Status {
        &self.status
    }

    /// Changes the status; it goes out when next due ([`Diagnostics::publish_due`]).
    pub fn set(&mut self, change: impl FnOnce(&mut Status)) {
        change(&mut self.status);
    }

    /// Publishes the status if it is due at `time_ns`: a second after it last went out, or at
    /// once when its level or message changed.
    pub fn publish_due<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        match self.schedule.due(&self.status, time_ns) {
            true => self.topic.publish(out, time_ns, &self.status),
            false => Ok(()),
        }
    }

    /// Changes the status, then publishes it if it is due at `time_ns`.
    pub fn update<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        change: impl FnOnce(&mut Status),
    ) -> Result<(), SinkError> {
        self.set(change);
        self.publish_due(out, time_ns)
    }

    /// Publishes the status now, due or not (a node's last word, or a report on its own
    /// clock); the next is due a second later.
    pub fn publish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        self.schedule.sent(self.status.level as u8, &self.status.message, time_ns);
        self.topic.publish(out, time_ns, &self.status)
    }
}

/// A node whose only output is its status: each event is its new level and message.
impl Publisher for Diagnostics {
    type Event = (Level, String);

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&(Level, String)>,
    ) -> Result<(), SinkError> {
        if let Some((level, message)) = event {
            self.set(|status| status.set(*level, message.clone(), Vec::new()));
        }
        self.publish_due(out, time_ns)
    }

    fn finish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        self.publish(out, time_ns)
    }
}

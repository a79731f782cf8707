//! What every serial device node publishes beside its own topics: `~/link_health`, the link's
//! condition and counters fed by the driver's events (at once when the condition or the last
//! error changes, otherwise once a second, see [`LinkReport::due`]), and the link's status on
//! /diagnostics.

use super::diagnostics::Diagnostics;
use crate::msg::interfaces;
use crate::msg::Header;
use crate::nodes::link_health::{LinkCondition, LinkReport};
use crate::nodes::status::{Schedule, Status};
use crate::outputs::{Outputs, Publisher, Qos, Sink, SinkError, Topic};

/// A serial device's own topics.
pub trait DeviceTopics {
    type Event;

    /// What `event` tells of the link's health.
    fn track_link(health: &mut LinkReport, event: &Self::Event);

    /// Publishes what `event` carries, received at `time_ns`.
    fn publish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64, event: &Self::Event) -> Result<(), SinkError>;
}

/// A serial device node's topics: the device's own, its link's health and its status.
#[derive(Debug)]
pub struct SerialDeviceTopics<D> {
    device: D,
    link_health: Topic<interfaces::LinkHealth>,
    health: LinkReport,
    schedule: Schedule,
    diagnostics: Diagnostics,
}

impl<D: DeviceTopics> SerialDeviceTopics<D> {
    /// Advertises `~/link_health` and /diagnostics beside the `device`'s topics, the link's
    /// status named `status_name` ("node: link") with the port as its hardware id.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        device: D,
        status_name: &str,
        port: &str,
    ) -> Result<SerialDeviceTopics<D>, SinkError> {
        Ok(SerialDeviceTopics {
            device,
            link_health: out.topic("~/link_health", Qos::STREAM)?,
            health: LinkReport::default(),
            schedule: Schedule::every_second(),
            diagnostics: Diagnostics::advertise(out, Status::new(status_name, port))?,
        })
    }
}

impl<D: DeviceTopics> Publisher for SerialDeviceTopics<D> {
    type Event = D::Event;

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&D::Event>,
    ) -> Result<(), SinkError> {
        if let Some(event) = event {
            D::track_link(&mut self.health, event);
        }
        if self.health.due(&mut self.schedule, time_ns) {
            let message = interfaces::LinkHealth::of(Header::at(time_ns, ""), &self.health);
            out.publish(self.link_health, time_ns, &message)?;
        }
        if let Some(event) = event {
            self.device.publish(out, time_ns, event)?;
        }
        let health = &self.health;
        self.diagnostics.update(out, time_ns, |status| health.report(status))
    }

    fn finish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        self.diagnostics.publish(out, time_ns)
    }
}

impl interfaces::LinkHealth {
    /// The link's `health` as published on `~/link_health`.
    pub fn of(header: Header, health: &LinkReport) -> interfaces::LinkHealth {
        interfaces::LinkHealth {
            header,
            state: match health.condition {
                LinkCondition::Waiting => interfaces::LinkHealth::STATE_WAITING,
                LinkCondition::Up => interfaces::LinkHealth::STATE_CONNECTED,
                LinkCondition::Degraded => interfaces::LinkHealth::STATE_DEGRADED,
                LinkCondition::Down => interfaces::LinkHealth::STATE_DISCONNECTED,
                LinkCondition::Failed => interfaces::LinkHealth::STATE_FAILED,
            },
            packets: health.packets,
            bad_packets: health.bad_packets,
            resends: health.resends,
            failed_requests: health.failed_requests,
            reconnects: health.reconnects,
            last_error: health.last_error.clone(),
        }
    }
}

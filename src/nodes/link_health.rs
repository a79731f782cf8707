//! The health of a serial device link, as stm32_driver and arduino_driver report it on
//! /diagnostics: the link's condition and what has gone over it.

use super::status::{Level, Schedule, Status};
use crate::drivers::rdscom::RdscomLinkState;
use crate::drivers::stm32::LinkState;
use std::fmt;

/// The condition of a link, common to the devices' own link states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkCondition {
    /// Nothing heard yet.
    Waiting,
    Up,
    /// Late answers; not yet given up.
    Degraded,
    /// No answers: reconnecting.
    Down,
    /// Reconnecting failed; the driver keeps trying.
    Failed,
}

impl fmt::Display for LinkCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LinkCondition::Waiting => "waiting for the device",
            LinkCondition::Up => "connected",
            LinkCondition::Degraded => "degraded: answers are late",
            LinkCondition::Down => "disconnected: reconnecting",
            LinkCondition::Failed => "failed: reconnection attempts exhausted, still retrying",
        })
    }
}

impl From<LinkState> for LinkCondition {
    fn from(state: LinkState) -> LinkCondition {
        match state {
            LinkState::Connected => LinkCondition::Up,
            LinkState::Degraded => LinkCondition::Degraded,
            LinkState::Disconnected => LinkCondition::Down,
            LinkState::Failed => LinkCondition::Failed,
        }
    }
}

impl From<RdscomLinkState> for LinkCondition {
    fn from(state: RdscomLinkState) -> LinkCondition {
        match state {
            RdscomLinkState::Up => LinkCondition::Up,
            RdscomLinkState::Lost => LinkCondition::Down,
        }
    }
}

/// A link's condition and counters, fed by the driver's events.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkReport {
    pub condition: LinkCondition,
    /// Good packets received.
    pub packets: u64,
    /// Packets refused (CRC, framing, implausible contents).
    pub bad_packets: u64,
    /// Requests sent again for want of an acknowledgement.
    pub resends: u64,
    /// Requests that got no acknowledgement or were refused by the device.
    pub failed_requests: u64,
    /// Times the link came back after being down.
    pub reconnects: u64,
    pub last_error: String,
}

impl Default for LinkReport {
    fn default() -> Self {
        LinkReport {
            condition: LinkCondition::Waiting,
            packets: 0,
            bad_packets: 0,
            resends: 0,
            failed_requests: 0,
            reconnects: 0,
            last_error: String::new(),
        }
    }
}

impl LinkReport {
    /// The link's condition changed to `condition`.
    pub fn changed(&mut self, condition: impl Into<LinkCondition>) {
        let condition = condition.into();
        if condition == LinkCondition::Up && matches!(self.condition, LinkCondition::Down | LinkCondition::Failed) {
            self.reconnects += 1;
        }
        self.condition = condition;
    }

    pub fn failed_request(&mut self, reason: String) {
        self.failed_requests += 1;
        self.last_error = reason;
    }

    /// The port could not be opened or vanished.
    pub fn port_error(&mut self, reason: String) {
        self.last_error = reason;
    }

    /// OK while connected, WARN while degraded or waiting for a first answer, ERROR while down.
    pub fn level(&self) -> Level {
        match self.condition {
            LinkCondition::Up => Level::Ok,
            LinkCondition::Waiting | LinkCondition::Degraded => Level::Warn,
            LinkCondition::Down | LinkCondition::Failed => Level::Error,
        }
    }

    /// Whether `schedule` has this health due on `~/link_health` at `now_ns`: at once when the
    /// condition or the last error changes, otherwise once a second (the counters change with
    /// every packet, which would make it as fast as the telemetry).
    pub fn due(&self, schedule: &mut Schedule, now_ns: u64) -> bool {
        schedule.due_on(self.condition as u8, &self.last_error, now_ns)
    }

    /// Writes the link's health into `status`.
    pub fn report(&self, status: &mut Status) {
        status.set(
            self.level(),
            self.condition.to_string(),
            vec![
                ("packets", self.packets.to_string()),
                ("bad_packets", self.bad_packets.to_string()),
                ("resends", self.resends.to_string()),
                ("failed_requests", self.failed_requests.to_string()),
                ("reconnects", self.reconnects.to_string()),
                ("last_error", self.last_error.clone()),
            ],
        );
    }
}

//! arduino_driver's guard of the testbench's velocity and effort modes. The MCU turns a joint at
//! a commanded rate, or pushes it with a commanded effort, until told otherwise, and keeps no
//! limit of its own: the node watches each joint's datastream sample while such a control may
//! run and stops the MCU (Stop: its controls end, its motors hold) before the joint leaves its
//! limits ([`JOINT_LIMITS`]).

use crate::drivers::rdscom::Request;
use crate::protocol::rdscom::Value;

use super::{JointSample, JOINT_LIMITS};

/// How close to a limit a joint under a rate may come before the MCU is stopped [rad], beyond
/// what it covers in two datastream periods at its speed.
pub const RATE_LIMIT_MARGIN_RAD: f64 = 0.05;

/// The joints under a velocity or an effort control, and how often they are heard.
#[derive(Debug, Clone)]
pub struct RateGuard {
    /// Each motor's control: (mode, value) in velocity (1) or effort (2) mode; None in position
    /// mode or none sent.
    rates: [Option<(i64, f64)>; 4],
    /// The datastream's period [s].
    sample_period_s: f64,
}

impl Default for RateGuard {
    /// A guard of the node's default datastream, 50 Hz.
    fn default() -> Self {
        RateGuard::heard_at(50)
    }
}

impl RateGuard {
    /// A guard of joints heard `stream_rate_hz` times a second (0: never, so that no rate may
    /// be commanded).
    pub fn heard_at(stream_rate_hz: u8) -> RateGuard {
        let sample_period_s = if stream_rate_hz == 0 { f64::INFINITY } else { 1.0 / f64::from(stream_rate_hz) };
        RateGuard { rates: [None; 4], sample_period_s }
    }

    /// Whether rates may be commanded: only with the datastream to watch them.
    pub fn check_allowed(&self) -> Result<(), String> {
        match self.sample_period_s.is_finite() {
            true => Ok(()),
            false => Err("velocity and effort commands need a datastream of every joint (arduino_driver's \
                          stream_rate_hz > 0; on the console, `stream all HZ`): it keeps the joints within \
                          their limits"
                .into()),
        }
    }

    /// `requests` went to the MCU: a motor's velocity or effort control is watched from now
    /// (queued, it may run at the next ControlGo), a position control or a Stop ends the watch;
    /// a datastream of every joint started or stopped sets how often they are heard.
    pub fn sent(&mut self, requests: &[Request]) {
        for request in requests {
            match (request.prototype.as_str(), &request.values[..]) {
                ("StartSensorDatastream", [Value::Int(255), Value::Int(hz), ..]) => {
                    *self = RateGuard { rates: self.rates, ..RateGuard::heard_at(u8::try_from(*hz).unwrap_or(0)) };
                }
                ("StopSensorDatastream", [Value::Int(255), ..]) => {
                    *self = RateGuard { rates: self.rates, ..RateGuard::heard_at(0) };
                }
                ("MotorControl", [Value::Int(motor), Value::Int(mode), Value::Float(value), ..]) => {
                    if let Some(rate) = usize::try_from(*motor).ok().and_then(|motor| self.rates.get_mut(motor)) {
                        *rate = (*mode != 0).then_some((*mode, *value));
                    }
                }
                ("Stop", _) => self.stopped(),
                _ => {}
            }
        }
    }

    /// The MCU was stopped: no control runs.
    pub fn stopped(&mut self) {
        self.rates = [None; 4];
    }

    /// A joint's `sample`: the Stop to send, and why, when its rate takes it within the margin
    /// of a limit (or past it) in the direction it drives.
    pub fn sample(&mut self, sample: &JointSample) -> Option<(Request, String)> {
        let (mode, value) = (*self.rates.get(sample.joint)?)?;
        let (lower, upper) = JOINT_LIMITS[sample.joint];
        // Velocity mode drives at its value; an effort at the speed the joint reports, if any.
        let speed = match mode {
            1 => value.abs(),
            _ => sample.velocity.map_or(0.0, f64::abs),
        };
        let margin = RATE_LIMIT_MARGIN_RAD + speed * 2.0 * self.sample_period_s;
        let position = sample.position;
        let leaving = match value {
            value if value > 0.0 => !(position < upper - margin),
            value if value < 0.0 => !(position > lower + margin),
            _ => false,
        };
        if !leaving {
            return None;
        }
        self.stopped();
        let unit = if mode == 1 { "rad/s" } else { "N m" };
        let why = format!(
            "joint {} at {position:.3} rad, driven at {value} {unit}, is within {margin:.3} rad of its limits \
             [{lower}, {upper}]: the MCU was stopped",
            sample.joint
        );
        Some((Request { prototype: "Stop".into(), values: vec![Value::Int(0)] }, why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn velocity(motor: i64, value: f64) -> Request {
        let values = vec![Value::Int(motor), Value::Int(1), Value::Float(value), Value::Bool(false)];
        Request { prototype: "MotorControl".into(), values }
    }

    fn at(joint: usize, position: f64) -> JointSample {
        JointSample { joint, position, velocity: None, temperature: None }
    }

    #[test]
    fn a_joint_driven_toward_its_limit_stops_the_mcu_a_margin_before_it() {
        let mut guard = RateGuard::default();
        guard.sent(&[velocity(1, 1.0)]);
        // 0.05 rad and two 20 ms periods at 1 rad/s: 0.09 rad before pi/2.
        assert!(guard.sample(&at(1, 1.0)).is_none());
        assert!(guard.sample(&at(0, 0.34)).is_none(), "joint 0 runs no rate");
        let (stop, why) = guard.sample(&at(1, 1.49)).expect("a stop");
        assert_eq!(stop.prototype, "Stop");
        assert!(why.contains("joint 1 at 1.490 rad"), "{why}");
        assert!(guard.sample(&at(1, 1.6)).is_none(), "stopped: nothing runs");
    }

    #[test]
    fn a_joint_driven_away_from_a_limit_it_is_at_goes_and_a_position_control_ends_the_watch() {
        let mut guard = RateGuard::default();
        guard.sent(&[velocity(2, -0.5)]);
        assert!(guard.sample(&at(2, 1.55)).is_none(), "away from the upper limit");
        assert!(guard.sample(&at(2, 0.05)).is_some(), "toward the lower");
        guard.sent(&[velocity(2, -0.5)]);
        let position = Request {
            prototype: "MotorControl".into(),
            values: vec![Value::Int(2), Value::Int(0), Value::Float(0.5), Value::Bool(false)],
        };
        guard.sent(&[position]);
        assert!(guard.sample(&at(2, 0.0)).is_none(), "a position control is the device's to keep");
    }

    #[test]
    fn an_effort_is_watched_at_the_speed_the_joint_reports_and_a_nan_stops() {
        let mut guard = RateGuard::default();
        let effort = Request {
            prototype: "MotorControl".into(),
            values: vec![Value::Int(0), Value::Int(2), Value::Float(0.5), Value::Bool(false)],
        };
        guard.sent(&[effort]);
        let moving = JointSample { joint: 0, position: 0.2, velocity: Some(3.0), temperature: None };
        assert!(guard.sample(&moving).is_some(), "0.15 rad from 0.35 at 3 rad/s: within 0.17");
        guard.sent(&[velocity(0, 1.0)]);
        assert!(guard.sample(&at(0, f64::NAN)).is_some(), "a position that is not a number fails closed");
    }

    #[test]
    fn without_a_datastream_no_rate_may_be_commanded() {
        assert!(RateGuard::heard_at(0).check_allowed().is_err());
        assert!(RateGuard::heard_at(1).check_allowed().is_ok());
    }
}

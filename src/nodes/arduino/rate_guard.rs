//! arduino_driver's guard of the testbench's velocity and effort modes. The MCU turns a joint at
//! a commanded rate, or pushes it with a commanded effort, until told otherwise, and keeps no
//! limit of its own: the node watches each such joint's datastream samples and stops the MCU
//! (Stop: its controls end, its motors hold) before the joint leaves its limits
//! ([`JOINT_LIMITS`]), or as soon as the joint is no longer heard; the joint stays watched until
//! the MCU acknowledges a Stop sent after its control, and the Stop goes again if the link gives
//! up on it.

use crate::drivers::rdscom::Request;
use crate::protocol::rdscom::Value;

use super::{JointSample, JOINT_LIMITS, MAX_VELOCITY_RAD_S};

/// How close to a limit a joint under a rate may come before the MCU is stopped [rad], beyond
/// what it covers in two datastream periods at its speed.
pub const RATE_LIMIT_MARGIN_RAD: f64 = 0.05;

/// How long after a Stop the guard sends another for a joint still about to leave its limits
/// [ns], where the link has neither acknowledged nor given up on the first (the link resends it
/// itself meanwhile, every second, three times).
const STOP_RETRY_NS: u64 = 5_000_000_000;

/// How many datastream periods a joint under a rate may go unheard.
const UNHEARD_PERIODS: f64 = 3.0;

/// A velocity (mode 1) or effort (mode 2) control that may run on a motor, and when the Stop
/// for it was last sent [ns].
#[derive(Debug, Clone, Copy)]
struct Rate {
    mode: i64,
    value: f64,
    watched_since_ns: u64,
    stop_sent_ns: Option<u64>,
}

/// The joints under a velocity or an effort control, and what the datastream says of them.
#[derive(Debug, Clone)]
pub struct RateGuard {
    rates: [Option<Rate>; 4],
    /// Each joint's last sample: when [ns], where [rad], and how fast it moved since the one
    /// before [rad/s].
    heard: [Option<(u64, f64, f64)>; 4],
    /// The datastream's period [s]; infinite without one.
    sample_period_s: f64,
}

impl Default for RateGuard {
    /// A guard of the node's default datastream, 50 Hz.
    fn default() -> Self {
        RateGuard::heard_at(50)
    }
}

/// Why a rate may not go, or the MCU must stop.
type Why = String;

impl RateGuard {
    /// A guard of joints heard `stream_rate_hz` times a second (0: never, so that no rate may
    /// be commanded).
    pub fn heard_at(stream_rate_hz: u8) -> RateGuard {
        let sample_period_s = if stream_rate_hz == 0 { f64::INFINITY } else { 1.0 / f64::from(stream_rate_hz) };
        RateGuard { rates: [None; 4], heard: [None; 4], sample_period_s }
    }

    /// How long a joint under a rate may go unheard [ns].
    fn unheard_ns(&self) -> f64 {
        UNHEARD_PERIODS * self.sample_period_s * 1e9
    }

    /// Whether motor `motor` may take `value` in `mode` (1 velocity, 2 effort) at `now_ns`:
    /// only while its joint is heard, and not toward a limit it is already near.
    pub fn check_rate(&self, motor: usize, mode: i64, value: f64, now_ns: u64) -> Result<(), Why> {
        let Some((at_ns, position, speed)) = self.heard.get(motor).copied().flatten() else {
            return Err(format!(
                "motor {motor}: velocity and effort need its joint's datastream (arduino_driver's stream_rate_hz > 0; \
                 on the console, `stream all HZ`): it keeps the joint within its limits"
            ));
        };
        if now_ns.saturating_sub(at_ns) as f64 > self.unheard_ns() {
            return Err(format!("motor {motor}: its joint has not been heard lately, so no rate may run"));
        }
        let rate = Rate { mode, value, watched_since_ns: now_ns, stop_sent_ns: None };
        match self.leaving(motor, &rate, position, speed) {
            Some(why) => Err(format!("motor {motor}: {why}")),
            None => Ok(()),
        }
    }

    /// Whether a datastream request may go: not while a rate is watched through it.
    pub fn check_stream(&self) -> Result<(), Why> {
        match self.rates.iter().any(Option::is_some) {
            true => Err("the datastream watches a velocity or effort control: stop it first (`stop`)".into()),
            false => Ok(()),
        }
    }

    /// `requests` went to the MCU at `now_ns`: a motor's velocity or effort control is watched
    /// from now (queued, it may run at the next ControlGo), a position control or a Stop ends
    /// the watch (a Stop's for good once the MCU acknowledges it); a datastream of every joint
    /// sets how often they are heard.
    pub fn sent(&mut self, requests: &[Request], now_ns: u64) {
        for request in requests {
            match (request.prototype.as_str(), &request.values[..]) {
                ("MotorControl", [Value::Int(motor), Value::Int(mode), Value::Float(value), ..]) => {
                    if let Some(rate) = usize::try_from(*motor).ok().and_then(|motor| self.rates.get_mut(motor)) {
                        let watched = Rate { mode: *mode, value: *value, watched_since_ns: now_ns, stop_sent_ns: None };
                        *rate = (*mode != 0).then_some(watched);
                    }
                }
                ("StartSensorDatastream", [Value::Int(255), Value::Int(hz), ..]) => {
                    self.sample_period_s = RateGuard::heard_at(u8::try_from(*hz).unwrap_or(0)).sample_period_s;
                }
                _ => {}
            }
        }
    }

    /// The node stopped the MCU (deactivated, say): no control runs.
    pub fn stopped(&mut self) {
        self.rates = [None; 4];
    }

    /// The MCU acknowledged a Stop sent at `sent_ns`: the controls sent before it ended, not
    /// those sent since.
    pub fn stop_acknowledged(&mut self, sent_ns: u64) {
        for rate in &mut self.rates {
            if rate.is_some_and(|rate| rate.watched_since_ns <= sent_ns) {
                *rate = None;
            }
        }
    }

    /// The link gave up on a Stop: the next sample that calls for one sends it again.
    pub fn stop_failed(&mut self) {
        self.rates.iter_mut().flatten().for_each(|rate| rate.stop_sent_ns = None);
    }

    /// A joint's `sample` at `now_ns`: the Stop to send, and why, when its rate takes it within
    /// the margin of a limit (or past it) in the direction it drives.
    pub fn sample(&mut self, sample: &JointSample, now_ns: u64) -> Option<(Request, Why)> {
        let heard = self.heard.get_mut(sample.joint)?;
        let measured = match *heard {
            Some((at_ns, position, _)) if now_ns > at_ns => {
                (sample.position - position).abs() / ((now_ns - at_ns) as f64 * 1e-9)
            }
            _ => 0.0,
        };
        let speed = sample.velocity.map_or(measured, |reported| reported.abs().max(measured));
        *heard = Some((now_ns, sample.position, speed));
        let rate = self.rates[sample.joint]?;
        let why = self.leaving(sample.joint, &rate, sample.position, speed)?;
        self.stop(sample.joint, now_ns, format!("joint {} {why}: the MCU was stopped", sample.joint))
    }

    /// At `now_ns`, with any event: the Stop to send, and why, when a joint under a rate has
    /// not been heard for [`UNHEARD_PERIODS`] datastream periods.
    pub fn unheard(&mut self, now_ns: u64) -> Option<(Request, Why)> {
        let unheard_ns = self.unheard_ns();
        let silent = (0..self.rates.len()).find(|&joint| {
            let Some(rate) = self.rates[joint] else { return false };
            let last_ns = self.heard[joint].map_or(rate.watched_since_ns, |(at_ns, _, _)| at_ns);
            now_ns.saturating_sub(last_ns.max(rate.watched_since_ns)) as f64 > unheard_ns
        })?;
        self.stop(silent, now_ns, format!("joint {silent}, under a rate, is no longer heard: the MCU was stopped"))
    }

    /// The Stop for `joint`'s rate at `now_ns`, unless one went less than [`STOP_RETRY_NS`] ago.
    fn stop(&mut self, joint: usize, now_ns: u64, why: Why) -> Option<(Request, Why)> {
        let rate = self.rates[joint].as_mut()?;
        if rate.stop_sent_ns.is_some_and(|sent_ns| now_ns.saturating_sub(sent_ns) < STOP_RETRY_NS) {
            return None;
        }
        rate.stop_sent_ns = Some(now_ns);
        Some((Request { prototype: "Stop".into(), values: vec![Value::Int(0)] }, why))
    }

    /// Why `rate` on `joint` at `position` [rad], moving at `speed` [rad/s], is about to take
    /// it past a limit, if it is: in velocity mode toward the limit its sign drives to; under an
    /// effort (which gravity and the tendons may overcome) toward either, at no less than the
    /// testbench's top speed.
    fn leaving(&self, joint: usize, rate: &Rate, position: f64, speed: f64) -> Option<Why> {
        let (lower, upper) = JOINT_LIMITS[joint];
        // An effort may speed a joint up to the testbench's top speed within a period.
        let speed = match rate.mode {
            1 => rate.value.abs().max(speed),
            _ => speed.max(MAX_VELOCITY_RAD_S),
        };
        let margin = RATE_LIMIT_MARGIN_RAD + speed * 2.0 * self.sample_period_s;
        let (up, down) = match rate.mode {
            1 => (rate.value > 0.0, rate.value < 0.0),
            _ => (true, true),
        };
        let near = (up && !(position < upper - margin)) || (down && !(position > lower + margin));
        let unit = if rate.mode == 1 { "rad/s" } else { "N m" };
        near.then(|| {
            format!(
                "at {position:.3} rad, driven at {} {unit}, is within {margin:.3} rad of its limits [{lower}, {upper}]",
                rate.value
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn control(motor: i64, mode: i64, value: f64) -> Request {
        let values = vec![Value::Int(motor), Value::Int(mode), Value::Float(value), Value::Bool(false)];
        Request { prototype: "MotorControl".into(), values }
    }

    fn at(joint: usize, position: f64) -> JointSample {
        JointSample { joint, position, velocity: None, temperature: None }
    }

    /// A guard that heard every joint at `positions` just now (time 0).
    fn hearing(positions: [f64; 4]) -> RateGuard {
        let mut guard = RateGuard::default();
        positions.iter().enumerate().for_each(|(joint, position)| _ = guard.sample(&at(joint, *position), 0));
        guard
    }

    #[test]
    fn a_joint_driven_toward_its_limit_stops_the_mcu_a_margin_before_it_until_the_stop_is_acknowledged() {
        let mut guard = hearing([0.0, 1.0, 0.5, 0.5]);
        assert!(guard.check_rate(1, 1, 1.0, 0).is_ok());
        guard.sent(&[control(1, 1, 1.0)], 0);
        // 0.05 rad and two 20 ms periods at 1 rad/s: 0.09 rad before pi/2.
        assert!(guard.sample(&at(1, 1.02), 20 * MS).is_none());
        assert!(guard.sample(&at(1, 1.47), 470 * MS).is_none());
        assert!(guard.sample(&at(0, 0.0), 470 * MS).is_none(), "joint 0 runs no rate");
        let (stop, why) = guard.sample(&at(1, 1.49), 490 * MS).expect("a stop");
        assert_eq!(stop.prototype, "Stop");
        assert!(why.contains("joint 1 at 1.490 rad"), "{why}");
        assert!(guard.sample(&at(1, 1.5), 510 * MS).is_none(), "the link resends it meanwhile");
        guard.stop_failed();
        assert!(guard.sample(&at(1, 1.5), 530 * MS).is_some(), "the link gave up on it: again");
        // A control sent after the Stop stays watched when the Stop is acknowledged.
        guard.sent(&[control(2, 1, 0.5)], 540 * MS);
        guard.stop_acknowledged(530 * MS);
        assert!(guard.sample(&at(1, 1.5), 700 * MS).is_none(), "acknowledged: nothing runs on joint 1");
        assert!(guard.sample(&at(2, 1.56), 700 * MS).is_some(), "joint 2's control came after the Stop");
    }

    #[test]
    fn no_rate_goes_toward_a_limit_the_joint_is_near_nor_for_a_joint_not_heard() {
        let guard = hearing([0.0, 1.55, 0.5, 0.5]);
        assert!(guard.check_rate(1, 1, 0.5, 0).unwrap_err().contains("within"));
        assert!(guard.check_rate(1, 1, -0.5, 0).is_ok(), "away from it");
        assert!(guard.check_rate(1, 1, -0.5, 100 * MS).unwrap_err().contains("not been heard"));
        assert!(RateGuard::default().check_rate(2, 1, 0.5, 0).unwrap_err().contains("datastream"));
        assert!(RateGuard::heard_at(0).check_rate(2, 1, 0.5, 0).is_err());
    }

    #[test]
    fn a_joint_under_a_rate_that_falls_silent_stops_the_mcu() {
        let mut guard = hearing([0.0, 0.5, 0.5, 0.5]);
        guard.sent(&[control(2, 1, 0.2)], 0);
        assert!(guard.unheard(50 * MS).is_none());
        let (_, why) = guard.unheard(61 * MS).expect("three periods unheard");
        assert!(why.contains("joint 2"), "{why}");
        assert!(guard.check_stream().is_err(), "the stream is not to change under it");
    }

    #[test]
    fn an_effort_is_watched_toward_both_limits_at_the_speed_the_joint_moves() {
        let mut guard = hearing([0.0, 0.5, 0.5, 0.5]);
        guard.sent(&[control(0, 2, 0.5)], 0);
        assert!(guard.sample(&at(0, 0.0), 20 * MS).is_none(), "at rest, mid-range");
        // Pushed up but falling: 0.1 rad in 20 ms is 5 rad/s, a margin of 0.25 rad.
        assert!(guard.sample(&at(0, -0.1), 40 * MS).is_some(), "toward the lower limit too");
        // At rest 0.2 rad from a limit: within the top speed's margin (0.17 rad) soon.
        let mut resting = hearing([0.15, 0.5, 0.5, 0.5]);
        resting.sent(&[control(0, 2, 0.1)], 0);
        assert!(resting.sample(&at(0, 0.15), 20 * MS).is_none());
        assert!(resting.sample(&at(0, 0.19), 40 * MS).is_some());
        guard.sent(&[control(0, 1, 1.0)], 50 * MS);
        assert!(guard.sample(&at(0, f64::NAN), 60 * MS).is_some(), "a position that is not a number fails closed");
    }

    #[test]
    fn a_position_control_ends_the_watch() {
        let mut guard = hearing([0.0, 0.5, 0.5, 0.5]);
        guard.sent(&[control(2, 1, -0.5)], 0);
        guard.sent(&[control(2, 0, 0.5)], 0);
        assert!(guard.sample(&at(2, 0.0), 20 * MS).is_none(), "a position control is the device's to keep");
        assert!(guard.unheard(1000 * MS).is_none());
    }
}

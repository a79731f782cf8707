//! The STM32 link as a state machine: polling, link health, command retries and unit
//! conversion, with no I/O and no clock (time is an argument).
//!
//! Call order, as in quinn-proto: feed input with [`Stm32Link::handle_bytes`],
//! [`Stm32Link::handle_port_opened`] / [`Stm32Link::handle_port_lost`] and user commands with
//! [`Stm32Link::send`]; call [`Stm32Link::handle_timeout`] once [`Stm32Link::poll_timeout`] has
//! passed (spurious calls do nothing); then drain [`Stm32Link::poll_transmit`] and
//! [`Stm32Link::poll_event`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::stm32_limits::{validate_command, CommandError, HOLD_LIMIT};
use crate::protocol::stm32::{
    encode_command, error_code, kind, Command, ControlMode, PacketDecoder, PayloadError, RawPacket, Telemetry,
};

/// How telemetry is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PollMode {
    /// Ask with GET_TELEMETRY at `poll_rate_hz` (the lab's firmware does not stream, docs/stm32.md); this
    /// also feeds the firmware's 500 ms command watchdog.
    Poll,
    /// Only listen, for firmware that streams by itself.
    Stream,
}

/// The units of the IMU fields on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImuUnits {
    /// m/s^2 and rad/s, as docs/stm32.md's source says.
    Si,
    /// g and deg/s, as the lab's firmware sends.
    Firmware,
}

/// Link settings. Defaults as docs/stm32.md gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Stm32Config {
    /// Baud rate, 8N1. Default 115200.
    pub baud: u32,
    pub poll_mode: PollMode,
    /// GET_TELEMETRY rate in poll mode [Hz]. Default 50.
    pub poll_rate_hz: f64,
    /// Silence after which the link is DEGRADED [s]. Default 0.1.
    pub degraded_after_s: f64,
    /// Silence after which the link is DISCONNECTED [s]. Default 0.5.
    pub disconnected_after_s: f64,
    /// Reconnection attempts (GET_TELEMETRY) before the link is FAILED. Default 3.
    pub reconnect_attempts: u32,
    /// Time between reconnection attempts [s]. Default 0.5.
    pub reconnect_interval_s: f64,
    /// Resends of a command the firmware refused for a CRC mismatch. Default 3.
    pub command_retries: u32,
    /// Time after which a command without ACK is reported unacknowledged [s]. Default 0.5.
    pub ack_timeout_s: f64,
    pub imu_units: ImuUnits,
    /// First wait before reopening a vanished port [s]; it doubles up to 2 s. Default 0.1.
    pub reopen_backoff_s: f64,
}

impl Default for Stm32Config {
    fn default() -> Self {
        Stm32Config {
            baud: 115_200,
            poll_mode: PollMode::Poll,
            poll_rate_hz: 50.0,
            degraded_after_s: 0.1,
            disconnected_after_s: 0.5,
            reconnect_attempts: 3,
            reconnect_interval_s: 0.5,
            command_retries: 3,
            ack_timeout_s: 0.5,
            imu_units: ImuUnits::Firmware,
            reopen_backoff_s: 0.1,
        }
    }
}

/// Link health, from the protocol's timeouts (docs/stm32.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LinkState {
    /// Telemetry within the last 100 ms.
    Connected,
    /// No telemetry for 100 ms.
    Degraded,
    /// No telemetry for 500 ms (or the port is gone); reconnecting.
    Disconnected,
    /// Reconnection failed 3 times; still trying.
    Failed,
}

/// IMU sample in SI units (REP-103).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct ImuSi {
    /// Linear acceleration [m/s^2].
    pub accel: [f64; 3],
    /// Angular velocity [rad/s].
    pub gyro: [f64; 3],
    /// Roll and pitch from the firmware's fusion [rad].
    pub roll: f64,
    pub pitch: f64,
}

/// Telemetry in SI units.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct ArmTelemetry {
    /// Firmware time since boot [ms], when sent.
    pub timestamp_ms: Option<u32>,
    /// Shoulder, elbow [rad].
    pub angles: Option<[f64; 2]>,
    /// Shoulder, elbow [rad/s].
    pub velocities: Option<[f64; 2]>,
    pub imu: Option<ImuSi>,
}

/// What the link reports.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkEvent {
    Telemetry(ArmTelemetry),
    StateChanged {
        from: LinkState,
        to: LinkState,
    },
    /// A command was acknowledged, `latency` after it was (last) sent.
    Acked {
        command: u8,
        latency: Duration,
    },
    /// A command refused for a CRC mismatch is sent again (`attempt` 1..=command_retries).
    Resent {
        command: u8,
        attempt: u32,
    },
    /// A command got no ACK within the timeout.
    Unacknowledged {
        command: u8,
    },
    /// A command was refused and will not be retried again.
    CommandFailed {
        command: u8,
        reason: String,
    },
    /// An ERROR_RESPONSE that no command retry absorbs.
    DeviceError {
        code: Option<u8>,
        failed_command: Option<u8>,
        message: String,
    },
    /// A packet with a valid frame and an unusable payload.
    BadPacket(PayloadError),
    /// Telemetry with a valid CRC but impossible values: taken for corruption that CRC-8 let
    /// through, and dropped.
    Implausible {
        what: &'static str,
    },
}

/// A packet waiting to be written; user commands are tracked for their ACK.
#[derive(Debug, Clone)]
struct Outgoing {
    /// The command's type.
    kind: u8,
    /// The joints whose targets it sets (shoulder, elbow), for a newer setpoint to replace it.
    sets: [bool; 2],
    bytes: Vec<u8>,
    /// The command type and the resends it has left, for commands that expect an ACK.
    tracked: Option<(u8, u32)>,
}

/// A command sent and not yet acknowledged.
#[derive(Debug, Clone)]
struct InFlight {
    kind: u8,
    bytes: Vec<u8>,
    sent_at: Instant,
    retries_left: u32,
}

/// The link's deadlines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    /// Next GET_TELEMETRY in poll mode.
    Poll,
    /// Next reconnection attempt while DISCONNECTED or FAILED.
    Reconnect,
    /// When silence makes the link DEGRADED, then DISCONNECTED.
    Health,
    /// When the oldest in-flight command times out.
    Ack,
}

/// The STM32 link state machine.
#[derive(Debug)]
pub struct Stm32Link {
    config: Stm32Config,
    decoder: PacketDecoder,
    state: LinkState,
    port_open: bool,
    last_telemetry: Instant,
    next_poll: Instant,
    next_reconnect: Instant,
    failed_attempts: u32,
    in_flight: VecDeque<InFlight>,
    outbox: VecDeque<Outgoing>,
    events: VecDeque<LinkEvent>,
    /// The joints' angles in the latest telemetry, within [`HOLD_LIMIT`] [rad], and when they came:
    /// the shutdown's hold.
    last_angles: Option<[f64; 2]>,
    last_angles_at: Instant,
}

/// The oldest angles a hold is made at: the firmware's command watchdog. Past it the servos may
/// have gone limp and sagged (or been moved by hand), and a hold at older angles would drive them
/// back.
const HOLD_MAX_AGE: Duration = Duration::from_millis(500);

impl Stm32Link {
    /// Commands kept for ACK matching; older ones are reported unacknowledged.
    const MAX_IN_FLIGHT: usize = 32;

    /// A link that has not heard from the firmware yet (DISCONNECTED, trying to connect).
    pub fn new(config: Stm32Config, now: Instant) -> Stm32Link {
        Stm32Link {
            config,
            decoder: PacketDecoder::new(),
            state: LinkState::Disconnected,
            port_open: false,
            last_telemetry: now,
            next_poll: now,
            next_reconnect: now,
            failed_attempts: 0,
            in_flight: VecDeque::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            last_angles: None,
            last_angles_at: now,
        }
    }

    pub fn state(&self) -> LinkState {
        self.state
    }

    pub fn config(&self) -> &Stm32Config {
        &self.config
    }

    /// Counts of the packet decoder.
    pub fn decoder_stats(&self) -> crate::protocol::stm32::DecoderStats {
        self.decoder.stats()
    }

    /// The most packets the outbox holds: past it a command is refused.
    pub const MAX_OUTBOX: usize = 64;

    /// Queues a user command after validating it. Angles replace the angles still queued that
    /// they set again (both joints' replace any, one joint's that joint's alone), behind what
    /// was queued before them (the order commands were sent in is kept), so that a stream
    /// faster than the wire sends its latest setpoint, never a backlog of stale ones, and a hold
    /// never waits behind them; they are never refused (a hold must go out). Past
    /// [`Stm32Link::MAX_OUTBOX`] another command is refused.
    ///
    /// A servo mode (POSITION, TRAJECTORY) sent at `now` goes out behind a hold where telemetry
    /// at most [`HOLD_MAX_AGE`] old puts the joints, and is refused without one: after IDLE the
    /// firmware would otherwise drive the servos back to the target it held before. Angles sent
    /// after it replace none queued before it, the hold among them.
    pub fn send(&mut self, now: Instant, command: &Command) -> Result<(), CommandError> {
        validate_command(command)?;
        if matches!(command, Command::SetMode(ControlMode::Position | ControlMode::Trajectory)) {
            let hold = self.hold_where_the_joints_are(now).ok_or(CommandError::NothingToHold)?;
            self.send(now, &hold)?;
        }
        let sets = command.targets_set();
        if sets != [false; 2] {
            let after_mode = self.outbox.iter().rposition(|queued| queued.kind == kind::SET_MODE).map_or(0, |i| i + 1);
            let set_again = |queued: &Outgoing| queued.sets != [false; 2] && (0..2).all(|j| sets[j] || !queued.sets[j]);
            let mut index = 0;
            self.outbox.retain(|queued| {
                index += 1;
                index <= after_mode || !set_again(queued)
            });
        } else if self.outbox.len() >= Self::MAX_OUTBOX {
            return Err(CommandError::Busy { queued: self.outbox.len() });
        }
        let mut bytes = Vec::with_capacity(32);
        encode_command(command, &mut bytes);
        // GET_TELEMETRY is answered with telemetry, not an ACK.
        let tracked = (command.kind() != kind::GET_TELEMETRY).then_some((command.kind(), self.config.command_retries));
        self.outbox.push_back(Outgoing { kind: command.kind(), sets, bytes, tracked });
        Ok(())
    }

    /// Queues a command another thread sent ([`Stm32Link::send`]); one refused is told as
    /// [`LinkEvent::CommandFailed`].
    pub fn handle_command(&mut self, now: Instant, command: &Command) {
        if let Err(error) = self.send(now, command) {
            self.events.push_back(LinkEvent::CommandFailed { command: command.kind(), reason: error.to_string() });
        }
    }

    /// The driver is stopping at `now`: a hold where the latest telemetry put the joints replaces
    /// what waits to be sent. With no angles, or none within [`HOLD_MAX_AGE`], nothing is sent:
    /// the firmware's watchdog idles the servos.
    pub fn handle_shutdown(&mut self, now: Instant) {
        self.outbox.clear();
        if let Some(hold) = self.hold_where_the_joints_are(now) {
            let _ = self.send(now, &hold);
        }
    }

    /// Both joints' angles where telemetry at most [`HOLD_MAX_AGE`] old at `now` put them.
    fn hold_where_the_joints_are(&self, now: Instant) -> Option<Command> {
        let [shoulder, elbow] =
            self.last_angles.filter(|_| now.saturating_duration_since(self.last_angles_at) <= HOLD_MAX_AGE)?;
        Some(Command::SetJointAngles { shoulder: shoulder as f32, elbow: elbow as f32 })
    }

    /// The port was (re)opened: start polling at once.
    pub fn handle_port_opened(&mut self, now: Instant) {
        self.port_open = true;
        self.decoder = PacketDecoder::new();
        self.next_poll = now;
        self.next_reconnect = now;
    }

    /// The port vanished: the link is DISCONNECTED until it is back and the firmware answers.
    pub fn handle_port_lost(&mut self, _now: Instant) {
        self.port_open = false;
        self.outbox.clear();
        for lost in self.in_flight.drain(..) {
            self.events.push_back(LinkEvent::CommandFailed { command: lost.kind, reason: "the port was lost".into() });
        }
        self.set_state(LinkState::Disconnected);
    }

    /// Received bytes.
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.decoder.push(bytes);
        while let Some(packet) = self.decoder.poll_packet() {
            self.handle_packet(now, &packet);
        }
    }

    fn handle_packet(&mut self, now: Instant, packet: &RawPacket) {
        let telemetry = match packet.telemetry() {
            Ok(telemetry) => telemetry,
            Err(error) => return self.events.push_back(LinkEvent::BadPacket(error)),
        };
        match telemetry {
            Telemetry::Ack { command } => {
                if let Some(done) = self.take_in_flight(command) {
                    self.events.push_back(LinkEvent::Acked { command: done.kind, latency: now - done.sent_at });
                }
            }
            Telemetry::Error { code, failed_command, message } => self.handle_error(code, failed_command, message),
            other => {
                let telemetry = self.to_si(&other);
                if let Err(what) = plausible(&telemetry) {
                    return self.events.push_back(LinkEvent::Implausible { what });
                }
                self.last_telemetry = now;
                if let Some(angles) = telemetry.angles {
                    self.last_angles = Some(angles.map(|x| x.clamp(-HOLD_LIMIT, HOLD_LIMIT)));
                    self.last_angles_at = now;
                }
                self.failed_attempts = 0;
                self.set_state(LinkState::Connected);
                self.events.push_back(LinkEvent::Telemetry(telemetry));
            }
        }
    }

    /// A CRC mismatch (or a firmware error that does not say why) resends the command, up to
    /// `command_retries` times.
    fn handle_error(&mut self, code: Option<u8>, failed_command: Option<u8>, message: String) {
        let retryable = matches!(code, None | Some(error_code::CRC_MISMATCH));
        if failed_command == Some(kind::GET_TELEMETRY) {
            return;
        }
        let Some(refused) = self.take_in_flight(failed_command) else {
            return self.events.push_back(LinkEvent::DeviceError { code, failed_command, message });
        };
        if retryable && refused.retries_left > 0 {
            let attempt = self.config.command_retries - refused.retries_left + 1;
            self.events.push_back(LinkEvent::Resent { command: refused.kind, attempt });
            self.outbox.push_front(Outgoing {
                kind: refused.kind,
                sets: [false; 2],
                bytes: refused.bytes,
                tracked: Some((refused.kind, refused.retries_left - 1)),
            });
            return;
        }
        let reason = match code {
            Some(error_code::CRC_MISMATCH) | None if retryable => {
                format!("refused {} times ({})", self.config.command_retries + 1, describe(code, &message))
            }
            _ => describe(code, &message),
        };
        self.events.push_back(LinkEvent::CommandFailed { command: refused.kind, reason });
    }

    /// Removes the oldest in-flight command of `kind` (any kind when `None`).
    fn take_in_flight(&mut self, kind: Option<u8>) -> Option<InFlight> {
        let index = self.in_flight.iter().position(|flight| kind.is_none_or(|kind| flight.kind == kind))?;
        self.in_flight.remove(index)
    }

    fn to_si(&self, telemetry: &Telemetry) -> ArmTelemetry {
        let (accel_scale, gyro_scale) = match self.config.imu_units {
            ImuUnits::Si => (1.0, 1.0),
            ImuUnits::Firmware => (STANDARD_GRAVITY, std::f64::consts::PI / 180.0),
        };
        let imu = |imu: &crate::protocol::stm32::ImuSample| ImuSi {
            accel: imu.accel.map(|a| f64::from(a) * accel_scale),
            gyro: imu.gyro.map(|w| f64::from(w) * gyro_scale),
            roll: f64::from(imu.orientation[0]),
            pitch: f64::from(imu.orientation[1]),
        };
        let pair = |values: [f32; 2]| values.map(f64::from);
        match telemetry {
            Telemetry::Full(full) => ArmTelemetry {
                timestamp_ms: Some(full.timestamp_ms),
                angles: Some(pair(full.angles)),
                velocities: Some(pair(full.velocities)),
                imu: Some(imu(&full.imu)),
            },
            Telemetry::AnglesOnly { timestamp_ms, angles } => {
                ArmTelemetry { timestamp_ms: *timestamp_ms, angles: Some(pair(*angles)), ..ArmTelemetry::default() }
            }
            Telemetry::ImuOnly { timestamp_ms, imu: sample } => {
                ArmTelemetry { timestamp_ms: Some(*timestamp_ms), imu: Some(imu(sample)), ..ArmTelemetry::default() }
            }
            Telemetry::Error { .. } | Telemetry::Ack { .. } => ArmTelemetry::default(),
        }
    }

    fn set_state(&mut self, to: LinkState) {
        if self.state != to {
            let from = std::mem::replace(&mut self.state, to);
            self.events.push_back(LinkEvent::StateChanged { from, to });
        }
    }

    fn deadline(&self, timer: Timer) -> Option<Instant> {
        let seconds = Duration::from_secs_f64;
        match timer {
            Timer::Poll => {
                (self.port_open && self.config.poll_mode == PollMode::Poll && self.is_up()).then_some(self.next_poll)
            }
            Timer::Reconnect => (self.port_open && !self.is_up()).then_some(self.next_reconnect),
            Timer::Health => match self.state {
                LinkState::Connected => Some(self.last_telemetry + seconds(self.config.degraded_after_s)),
                LinkState::Degraded => Some(self.last_telemetry + seconds(self.config.disconnected_after_s)),
                LinkState::Disconnected | LinkState::Failed => None,
            },
            Timer::Ack => self.in_flight.front().map(|flight| flight.sent_at + seconds(self.config.ack_timeout_s)),
        }
    }

    fn is_up(&self) -> bool {
        matches!(self.state, LinkState::Connected | LinkState::Degraded)
    }

    /// The earliest deadline, if any.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [Timer::Poll, Timer::Reconnect, Timer::Health, Timer::Ack]
            .into_iter()
            .filter_map(|timer| self.deadline(timer))
            .min()
    }

    /// Acts on every deadline that has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let seconds = Duration::from_secs_f64;
        if self.deadline(Timer::Health).is_some_and(|deadline| deadline <= now) {
            let silence = now - self.last_telemetry;
            if silence >= seconds(self.config.disconnected_after_s) {
                self.set_state(LinkState::Disconnected);
                self.failed_attempts = 0;
                self.next_reconnect = now;
            } else {
                self.set_state(LinkState::Degraded);
            }
        }
        if self.deadline(Timer::Poll).is_some_and(|deadline| deadline <= now) {
            self.queue_get_telemetry();
            self.next_poll = advance(self.next_poll, seconds(1.0 / self.config.poll_rate_hz), now);
        }
        if self.deadline(Timer::Reconnect).is_some_and(|deadline| deadline <= now) {
            if self.failed_attempts >= self.config.reconnect_attempts {
                self.set_state(LinkState::Failed);
            }
            self.failed_attempts += 1;
            self.queue_get_telemetry();
            self.next_reconnect = now + seconds(self.config.reconnect_interval_s);
        }
        while self.deadline(Timer::Ack).is_some_and(|deadline| deadline <= now) {
            if let Some(late) = self.in_flight.pop_front() {
                self.events.push_back(LinkEvent::Unacknowledged { command: late.kind });
            }
        }
    }

    fn queue_get_telemetry(&mut self) {
        let mut bytes = Vec::with_capacity(4);
        encode_command(&Command::GetTelemetry, &mut bytes);
        self.outbox.push_back(Outgoing { kind: kind::GET_TELEMETRY, sets: [false; 2], bytes, tracked: None });
    }

    /// The next packet to write into `buf`; false when there is none.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> bool {
        let Some(Outgoing { bytes, tracked, .. }) = self.outbox.pop_front() else { return false };
        buf.extend_from_slice(&bytes);
        if let Some((kind, retries_left)) = tracked {
            if self.in_flight.len() == Self::MAX_IN_FLIGHT {
                if let Some(oldest) = self.in_flight.pop_front() {
                    self.events.push_back(LinkEvent::Unacknowledged { command: oldest.kind });
                }
            }
            self.in_flight.push_back(InFlight { kind, bytes, sent_at: now, retries_left });
        }
        true
    }

    pub fn poll_event(&mut self) -> Option<LinkEvent> {
        self.events.pop_front()
    }
}

/// Checks telemetry against what the arm and its MPU6050 can report: finite values, joint angles
/// within +-pi, rates within 20 rad/s, accelerations within 16 g, rotation rates within
/// 2000 deg/s. (The firmware clock is not checked: one corrupted timestamp accepted as the
/// latest would make every genuine one after it look wrong.)
fn plausible(telemetry: &ArmTelemetry) -> Result<(), &'static str> {
    let within = |values: &[f64], limit: f64| values.iter().all(|value| value.is_finite() && value.abs() <= limit);
    if !telemetry.angles.is_none_or(|angles| within(&angles, std::f64::consts::PI)) {
        return Err("joint angle");
    }
    if !telemetry.velocities.is_none_or(|rates| within(&rates, 20.0)) {
        return Err("joint velocity");
    }
    if let Some(imu) = &telemetry.imu {
        if !within(&imu.accel, 16.0 * STANDARD_GRAVITY) {
            return Err("acceleration");
        }
        if !within(&imu.gyro, 2000f64.to_radians()) {
            return Err("rotation rate");
        }
        if !within(&[imu.roll, imu.pitch], std::f64::consts::PI) {
            return Err("orientation");
        }
    }
    Ok(())
}

/// Standard gravity [m/s^2], for IMU readings in g.
pub const STANDARD_GRAVITY: f64 = 9.80665;

/// The next periodic deadline after `now`, skipping missed periods.
fn advance(deadline: Instant, period: Duration, now: Instant) -> Instant {
    let mut next = deadline + period;
    while next <= now {
        next += period;
    }
    next
}

fn describe(code: Option<u8>, message: &str) -> String {
    let name = match code {
        None => "firmware error without a code",
        Some(error_code::INVALID_CMD) => "invalid command",
        Some(error_code::CRC_MISMATCH) => "CRC mismatch",
        Some(error_code::OUT_OF_RANGE) => "out of range",
        Some(error_code::TIMEOUT) => "timeout",
        Some(error_code::HARDWARE) => "hardware failure",
        Some(error_code::BUSY) => "busy",
        Some(_) => "unknown error code",
    };
    if message.is_empty() {
        name.to_owned()
    } else {
        format!("{name}: {message}")
    }
}

//! The STM32 link state machine on a virtual clock: link health, reconnection, command
//! retries, validation and units.

use std::time::{Duration, Instant};

use arm_hil::drivers::stm32::{CommandError, ImuUnits, LinkEvent, LinkState, Stm32Config, Stm32Link, STANDARD_GRAVITY};
use arm_hil::protocol::stm32::{
    encode_telemetry, error_code, kind, Command, FullTelemetry, ImuSample, LengthStyle, PacketDecoder, PidGains,
    Telemetry,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// What `link` sends at `now`, decoded: every packet it has to transmit.
fn transmitted(link: &mut Stm32Link, now: Instant) -> Vec<Command> {
    let mut bytes = Vec::new();
    while link.poll_transmit(now, &mut bytes) {}
    let mut decoder = PacketDecoder::new();
    decoder.push(&bytes);
    std::iter::from_fn(|| decoder.poll_packet()).map(|packet| packet.command().unwrap()).collect()
}

fn telemetry_bytes() -> Vec<u8> {
    let mut bytes = Vec::new();
    let full = FullTelemetry {
        timestamp_ms: 1,
        angles: [0.5, -0.5],
        velocities: [0.0, 0.0],
        imu: ImuSample { accel: [0.0, 0.0, 1.0], gyro: [30.0, 0.0, 0.0], orientation: [0.0, 0.1] },
    };
    encode_telemetry(&Telemetry::Full(full), LengthStyle::Firmware, &mut bytes);
    bytes
}

/// Runs the link's timers up to `until`, collecting events and what it sent.
fn run_until(link: &mut Stm32Link, until: Instant, events: &mut Vec<LinkEvent>, sent: &mut Vec<Command>) {
    while let Some(deadline) = link.poll_timeout().filter(|deadline| *deadline <= until) {
        link.handle_timeout(deadline);
        sent.extend(transmitted(link, deadline));
        events.extend(std::iter::from_fn(|| link.poll_event()));
    }
}

fn states(events: &[LinkEvent]) -> Vec<LinkState> {
    events
        .iter()
        .filter_map(|event| if let LinkEvent::StateChanged { to, .. } = event { Some(*to) } else { None })
        .collect()
}

#[test]
fn silence_degrades_then_disconnects_then_fails_and_telemetry_reconnects() {
    let start = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), start);
    link.handle_port_opened(start);
    let (mut events, mut sent) = (Vec::new(), Vec::new());
    link.handle_bytes(start, &telemetry_bytes());
    events.extend(std::iter::from_fn(|| link.poll_event()));
    assert_eq!(link.state(), LinkState::Connected);

    run_until(&mut link, start + ms(99), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Connected);
    // Polls at 50 Hz while connected.
    assert_eq!(sent.iter().filter(|c| **c == Command::GetTelemetry).count(), 5);
    run_until(&mut link, start + ms(100), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Degraded);
    run_until(&mut link, start + ms(499), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Degraded);
    sent.clear();
    run_until(&mut link, start + ms(500), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Disconnected);
    // Three reconnection attempts, 0.5 s apart from the disconnection on, then FAILED.
    run_until(&mut link, start + ms(1999), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Disconnected);
    assert_eq!(sent, vec![Command::GetTelemetry; 3]);
    run_until(&mut link, start + ms(2000), &mut events, &mut sent);
    assert_eq!(link.state(), LinkState::Failed);
    link.handle_bytes(start + ms(2100), &telemetry_bytes());
    events.extend(std::iter::from_fn(|| link.poll_event()));
    assert_eq!(link.state(), LinkState::Connected);
    assert_eq!(
        states(&events),
        vec![
            LinkState::Connected,
            LinkState::Degraded,
            LinkState::Disconnected,
            LinkState::Failed,
            LinkState::Connected
        ]
    );
}

fn error_bytes(code: Option<u8>, failed_command: Option<u8>, style: LengthStyle) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_telemetry(&Telemetry::Error { code, failed_command, message: String::new() }, style, &mut bytes);
    bytes
}

#[test]
fn a_command_refused_for_crc_mismatch_is_resent_three_times_then_reported() {
    let start = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), start);
    link.handle_port_opened(start);
    let command = Command::SetJointAngles { shoulder: 0.3, elbow: -0.2 };
    link.send(start, &command).unwrap();
    let mut sends = 0;
    let mut events = Vec::new();
    for attempt in 0..5 {
        let now = start + ms(attempt);
        let mut bytes = Vec::new();
        while link.poll_transmit(now, &mut bytes) {}
        let mut decoder = PacketDecoder::new();
        decoder.push(&bytes);
        sends +=
            std::iter::from_fn(|| decoder.poll_packet()).filter(|packet| packet.kind == kind::SET_JOINT_ANGLES).count();
        link.handle_bytes(
            now,
            &error_bytes(Some(error_code::CRC_MISMATCH), Some(kind::SET_JOINT_ANGLES), LengthStyle::Document),
        );
        events.extend(std::iter::from_fn(|| link.poll_event()));
    }
    assert_eq!(sends, 4, "the first send and three retries");
    let resent: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            LinkEvent::Resent { command: kind::SET_JOINT_ANGLES, attempt } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(resent, [1, 2, 3], "{events:?}");
    let failed: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, LinkEvent::CommandFailed { command: kind::SET_JOINT_ANGLES, .. }))
        .collect();
    assert_eq!(failed.len(), 1, "{events:?}");
}

#[test]
fn acks_in_either_convention_report_the_command_and_latency() {
    let start = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), start);
    link.handle_port_opened(start);
    link.send(start, &Command::SystemReset).unwrap();
    let mut bytes = Vec::new();
    while link.poll_transmit(start, &mut bytes) {}
    let mut ack = Vec::new();
    encode_telemetry(&Telemetry::Ack { command: None }, LengthStyle::Firmware, &mut ack);
    link.handle_bytes(start + ms(7), &ack);
    let events: Vec<_> = std::iter::from_fn(|| link.poll_event()).collect();
    assert!(events.contains(&LinkEvent::Acked { command: kind::SYSTEM_RESET, latency: ms(7) }), "{events:?}");
}

#[test]
fn out_of_range_targets_and_gains_are_refused_before_sending() {
    let mut link = Stm32Link::new(Stm32Config::default(), Instant::now());
    let refused = link.send(Instant::now(), &Command::SetJointAngles { shoulder: 1.6, elbow: 0.0 }).unwrap_err();
    assert!(matches!(refused, CommandError::OutOfRange { what: "shoulder angle", .. }));
    assert!(refused.to_string().contains("1.6"), "{refused}");
    let gains = PidGains { kp: 11.0, ki: 0.5, kd: 0.5 };
    assert!(link.send(Instant::now(), &Command::SetPidGains { shoulder: gains, elbow: gains }).is_err());
    let gains = PidGains { kp: 1.0, ki: 1.5, kd: 0.5 };
    assert!(link
        .send(Instant::now(), &Command::SetPidGainsSingle { joint: arm_hil::protocol::stm32::Joint::Elbow, gains })
        .is_err());
    let mut bytes = Vec::new();
    assert!(!link.poll_transmit(Instant::now(), &mut bytes));
}

#[test]
fn one_joints_setpoints_are_replaced_by_its_newer_ones_and_a_hold_goes_out_behind_none() {
    use arm_hil::protocol::stm32::Joint;
    let now = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), now);
    link.handle_bytes(now, &telemetry_bytes());
    for k in 0..1000 {
        let angle = k as f32 * 1e-4;
        link.send(now, &Command::SetJointAngleSingle { joint: Joint::Shoulder, angle }).unwrap();
        link.send(now, &Command::SetJointAngleSingle { joint: Joint::Elbow, angle: -angle }).unwrap();
    }
    let sent = |link: &mut Stm32Link| transmitted(link, now);
    let last = 999.0 * 1e-4;
    assert_eq!(
        sent(&mut link),
        [
            Command::SetJointAngleSingle { joint: Joint::Shoulder, angle: last },
            Command::SetJointAngleSingle { joint: Joint::Elbow, angle: -last }
        ],
        "each joint's latest only"
    );
    for k in 0..1000 {
        link.send(now, &Command::SetJointAngleSingle { joint: Joint::Shoulder, angle: k as f32 * 1e-4 }).unwrap();
    }
    link.send(now, &Command::SetJointAngles { shoulder: 0.1, elbow: 0.1 }).unwrap();
    assert_eq!(
        sent(&mut link),
        [Command::SetJointAngles { shoulder: 0.1, elbow: 0.1 }],
        "the hold, behind none of them"
    );
}

#[test]
fn a_setpoint_flood_sends_only_the_latest_angles_and_the_outbox_is_bounded() {
    let now = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), now);
    link.handle_bytes(now, &telemetry_bytes());
    for k in 0..1000 {
        link.send(now, &Command::SetJointAngles { shoulder: k as f32 * 1e-3, elbow: 0.0 }).unwrap();
    }
    link.send(now, &Command::SetMode(arm_hil::protocol::stm32::ControlMode::Position)).unwrap();
    link.send(now, &Command::SetJointAngles { shoulder: 0.5, elbow: 0.0 }).unwrap();
    let sent = transmitted(&mut link, now);
    assert_eq!(
        sent,
        [
            Command::SetJointAngles { shoulder: 0.5, elbow: -0.5 },
            Command::SetMode(arm_hil::protocol::stm32::ControlMode::Position),
            Command::SetJointAngles { shoulder: 0.5, elbow: 0.0 }
        ],
        "the latest setpoint only, in the order the commands were sent; the mode's hold kept before it"
    );

    for _ in 0..Stm32Link::MAX_OUTBOX {
        link.send(now, &Command::CalibrateImu).unwrap();
    }
    assert!(matches!(link.send(now, &Command::SystemReset), Err(CommandError::Busy { .. })));
    link.send(now, &Command::SetJointAngles { shoulder: 0.1, elbow: 0.1 }).expect("a hold is never refused");
    link.handle_command(now, &Command::SystemReset);
    let refused = std::iter::from_fn(|| link.poll_event()).find(|e| matches!(e, LinkEvent::CommandFailed { .. }));
    assert!(
        matches!(&refused, Some(LinkEvent::CommandFailed { command: kind::SYSTEM_RESET, reason }) if reason.contains("flood")),
        "{refused:?}"
    );
    let last = transmitted(&mut link, now).last().cloned();
    assert_eq!(last, Some(Command::SetJointAngles { shoulder: 0.1, elbow: 0.1 }), "the hold went out");
}

#[test]
fn a_servo_mode_goes_out_behind_a_hold_where_the_joints_are() {
    use arm_hil::protocol::stm32::ControlMode;
    let now = Instant::now();
    let mut link = Stm32Link::new(Stm32Config::default(), now);
    link.handle_bytes(now, &telemetry_bytes());
    let sent = |link: &mut Stm32Link| transmitted(link, now);
    link.send(now, &Command::SetMode(ControlMode::Idle)).unwrap();
    assert_eq!(sent(&mut link), [Command::SetMode(ControlMode::Idle)], "going limp needs no hold");
    for mode in [ControlMode::Position, ControlMode::Trajectory] {
        link.send(now, &Command::SetMode(mode)).unwrap();
        assert_eq!(
            sent(&mut link),
            [Command::SetJointAngles { shoulder: 0.5, elbow: -0.5 }, Command::SetMode(mode)],
            "the firmware's old target is replaced before the servos are driven again"
        );
    }
    let later = now + ms(600);
    assert!(
        matches!(link.send(later, &Command::SetMode(ControlMode::Position)), Err(CommandError::NothingToHold)),
        "no hold at angles older than the firmware's watchdog"
    );
    let mut silent = Stm32Link::new(Stm32Config::default(), now);
    assert!(matches!(silent.send(now, &Command::SetMode(ControlMode::Position)), Err(CommandError::NothingToHold)));
}

#[test]
fn the_shutdown_holds_the_joints_where_telemetry_put_them_unless_it_is_older_than_the_watchdog() {
    let start = Instant::now();
    let shutdown_at = |age: Duration| {
        let mut link = Stm32Link::new(Stm32Config::default(), start);
        link.handle_bytes(start, &telemetry_bytes());
        link.send(start, &Command::SetJointAngles { shoulder: 1.0, elbow: 1.0 }).unwrap();
        link.handle_shutdown(start + age);
        transmitted(&mut link, start + age)
    };
    assert_eq!(shutdown_at(ms(400)), [Command::SetJointAngles { shoulder: 0.5, elbow: -0.5 }]);
    assert_eq!(shutdown_at(ms(600)), [], "no hold at angles the servos may have sagged from");
}

#[test]
fn imu_readings_are_converted_to_si() {
    let start = Instant::now();
    let expect = |units: ImuUnits, accel_z: f64, gyro_x: f64| {
        let mut link = Stm32Link::new(Stm32Config { imu_units: units, ..Stm32Config::default() }, start);
        link.handle_bytes(start, &telemetry_bytes());
        let telemetry = std::iter::from_fn(|| link.poll_event())
            .find_map(|event| if let LinkEvent::Telemetry(telemetry) = event { Some(telemetry) } else { None })
            .unwrap();
        let imu = telemetry.imu.unwrap();
        assert!((imu.accel[2] - accel_z).abs() < 1e-9 && (imu.gyro[0] - gyro_x).abs() < 1e-6, "{imu:?}");
        assert_eq!(telemetry.angles, Some([0.5, -0.5]));
    };
    expect(ImuUnits::Firmware, STANDARD_GRAVITY, std::f64::consts::PI / 6.0);
    expect(ImuUnits::Si, 1.0, 30.0);
}

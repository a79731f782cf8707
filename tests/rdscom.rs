//! rdscom: the codec against docs/rdscom.md, the link on a virtual clock, and the driver against
//! the MCU emulator through a real pseudo-terminal.

use std::time::{Duration, Instant};

use arm_hil::drivers::rdscom::{
    parse_console_command, DriverEvent, RdscomConfig, RdscomDriver, RdscomEvent, RdscomLink, RdscomLinkState, Request,
};
use arm_hil::emulate::rdscom::{RdscomEmulator, RdscomFaults};
use arm_hil::protocol::rdscom::{encode, EncodeError, FrameDecoder, FrameType, Message, PrototypeTable, Value};
use proptest::prelude::*;

fn hex(text: &str) -> Vec<u8> {
    text.split_whitespace().map(|byte| u8::from_str_radix(byte, 16).unwrap()).collect()
}

fn motor_control() -> Message {
    Message {
        kind: FrameType::Request,
        prototype: 1,
        number: 1,
        values: vec![Value::Int(2), Value::Int(0), Value::Float(1.5), Value::Bool(true)],
    }
}

#[test]
fn the_design_test_vector_encodes_byte_for_byte_and_decodes_back() {
    let table = PrototypeTable::document();
    let mut bytes = Vec::new();
    encode(&motor_control(), &table, &mut bytes).unwrap();
    assert_eq!(bytes, hex("52 52 52 00 01 00 01 02 00 00 00 C0 3F 01 45 4E 44"));
    let mut decoder = FrameDecoder::new(table);
    decoder.push(&bytes);
    assert_eq!(decoder.poll_message(), Some(motor_control()));
}

#[test]
fn a_payload_containing_end_decodes_correctly() {
    let table = PrototypeTable::document();
    // SensorDatastream {joint 1, data} with data's bytes 45 4E 44 40 ("END@").
    let data = f64::from(f32::from_le_bytes(*b"END@"));
    let message =
        Message { kind: FrameType::Response, prototype: 6, number: 9, values: vec![Value::Int(1), Value::Float(data)] };
    let mut bytes = Vec::new();
    encode(&message, &table, &mut bytes).unwrap();
    assert!(bytes.windows(3).filter(|w| w == b"END").count() == 2, "the payload holds END: {bytes:02x?}");
    for piece in 1..=bytes.len() {
        let mut decoder = FrameDecoder::new(table.clone());
        let mut found = Vec::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk);
            found.extend(std::iter::from_fn(|| decoder.poll_message()));
        }
        assert_eq!(found, vec![message.clone()], "split into pieces of {piece}");
    }
}

#[test]
fn frames_are_found_after_false_starts_and_unknown_prototypes() {
    let table = PrototypeTable::document();
    let mut stream = b"RR RRR\x00\x63\x00\x01xyz RRR\x00\x01\x00\x01\x02END".to_vec();
    encode(&motor_control(), &table, &mut stream).unwrap();
    let mut decoder = FrameDecoder::new(table);
    decoder.push(&stream);
    assert_eq!(decoder.poll_message(), Some(motor_control()));
    assert_eq!(decoder.poll_message(), None);
    let stats = decoder.stats();
    assert_eq!((stats.unknown_prototypes, stats.frames), (1, 1));
    assert!(stats.bad_frames >= 1 && stats.dropped_bytes > 10, "{stats:?}");
}

#[test]
fn the_firmware_table_and_yaml_tables_describe_the_newer_messages() {
    let firmware = PrototypeTable::firmware();
    assert_eq!(firmware.by_name("SensorDatastream").unwrap().payload_size(), 17);
    assert_eq!(firmware.by_name("ZeroCommand").unwrap().id, 11);
    assert_eq!(firmware.get(80).unwrap().name, "LibraryError");
    let yaml = "prototypes:\n  - id: 0\n    name: Heartbeat\n    ack: true\n    fields:\n      - {name: rand, type: int8}\n  - id: 6\n    name: SensorDatastream\n    fields:\n      - {name: joint_id, type: uint8}\n      - {name: data, type: float}\n";
    let table = PrototypeTable::from_yaml(yaml).unwrap();
    assert!(table.get(0).unwrap().ack && !table.get(6).unwrap().ack);
    assert!(PrototypeTable::from_yaml(
        "prototypes:\n  - {id: 1, name: A, fields: []}\n  - {id: 1, name: B, fields: []}\n"
    )
    .is_err());
    assert!(
        PrototypeTable::from_yaml("prototypes:\n  - {id: 1, name: A, fields: [{name: x, type: complex}]}\n").is_err()
    );
}

proptest! {
    /// Random garbage between frames never yields a false frame: every frame found is one sent.
    #[test]
    fn garbage_between_frames_never_yields_a_false_frame(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8),
        piece in 1usize..64,
    ) {
        let table = PrototypeTable::document();
        let mut stream = Vec::new();
        let mut sent = Vec::new();
        for (index, noise) in garbage.iter().enumerate() {
            stream.extend_from_slice(noise);
            let message = Message { number: index as u16, ..motor_control() };
            encode(&message, &table, &mut stream).unwrap();
            sent.push(message);
        }
        let mut decoder = FrameDecoder::new(table);
        let mut found = Vec::new();
        for chunk in stream.chunks(piece) {
            decoder.push(chunk);
            found.extend(std::iter::from_fn(|| decoder.poll_message()));
        }
        prop_assert_eq!(found, sent);
    }

    #[test]
    fn the_decoder_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut decoder = FrameDecoder::new(PrototypeTable::firmware());
        decoder.push(&bytes);
        while decoder.poll_message().is_some() {}
    }
}

/// Runs the link's timers up to `until`, collecting events and counting frames of `prototype`.
fn run_until(link: &mut RdscomLink, until: Instant, events: &mut Vec<RdscomEvent>, prototype: u8) -> usize {
    let mut sent = 0;
    while let Some(deadline) = link.poll_timeout().filter(|deadline| *deadline <= until) {
        link.handle_timeout(deadline);
        let mut bytes = Vec::new();
        while link.poll_transmit(&mut bytes) {}
        let mut decoder = FrameDecoder::new(PrototypeTable::document());
        decoder.push(&bytes);
        sent += std::iter::from_fn(|| decoder.poll_message()).filter(|m| m.prototype == prototype).count();
        events.extend(std::iter::from_fn(|| link.poll_event()));
    }
    sent
}

#[test]
fn an_unanswered_request_is_resent_every_second_three_times_then_reported() {
    let start = Instant::now();
    let mut link = RdscomLink::new(RdscomConfig::default(), PrototypeTable::document(), start);
    let number = link.request(start, "ControlGo", vec![Value::Int(5)]).unwrap();
    let mut first = Vec::new();
    while link.poll_transmit(&mut first) {}
    let mut events = Vec::new();
    let resends = run_until(&mut link, start + Duration::from_millis(3999), &mut events, 3);
    assert_eq!(resends, 3);
    assert!(!events.iter().any(|e| matches!(e, RdscomEvent::Failed { .. })));
    run_until(&mut link, start + Duration::from_millis(4000), &mut events, 3);
    assert!(events.contains(&RdscomEvent::Failed { prototype: 3, number }), "{events:?}");
}

#[test]
fn a_flood_is_refused_past_the_bound_and_a_stop_goes_first_giving_up_what_waited() {
    let start = Instant::now();
    let mut link = RdscomLink::new(RdscomConfig::default(), PrototypeTable::document(), start);
    let first = link.request(start, "ControlGo", vec![Value::Int(5)]).unwrap();
    for _ in 1..RdscomLink::MAX_PENDING {
        link.request(start, "ControlGo", vec![Value::Int(5)]).unwrap();
    }
    let refused = link.request(start, "ControlGo", vec![Value::Int(5)]).unwrap_err();
    assert!(refused.to_string().contains("flood"), "{refused}");
    link.handle_request(start, "ControlGo", vec![Value::Int(5)]);
    let told: Vec<RdscomEvent> = std::iter::from_fn(|| link.poll_event()).collect();
    assert!(matches!(&told[..], [RdscomEvent::Refused { prototype, .. }] if prototype == "ControlGo"), "{told:?}");

    let stop = link.request(start, "Stop", vec![Value::Int(1)]).unwrap();
    let given_up: Vec<RdscomEvent> = std::iter::from_fn(|| link.poll_event()).collect();
    assert_eq!(given_up.len(), RdscomLink::MAX_PENDING, "every request that waited is given up");
    assert_eq!(given_up[0], RdscomEvent::Failed { prototype: 3, number: first });
    let mut sent = Vec::new();
    while link.poll_transmit(&mut sent) {}
    let mut decoder = FrameDecoder::new(PrototypeTable::document());
    decoder.push(&sent);
    let written: Vec<u16> = std::iter::from_fn(|| decoder.poll_message()).map(|m| m.number).collect();
    assert_eq!(written, [stop], "the Stop goes alone, no backlog before it");
    assert!(link.request(start, "ControlGo", vec![Value::Int(5)]).is_ok(), "room again after the Stop");
}

#[test]
fn a_late_acknowledgement_ends_the_retries() {
    let start = Instant::now();
    let table = PrototypeTable::document();
    let mut link = RdscomLink::new(RdscomConfig::default(), table.clone(), start);
    let number = link.request(start, "Stop", vec![Value::Int(1)]).unwrap();
    let mut events = Vec::new();
    run_until(&mut link, start + Duration::from_millis(1500), &mut events, 10);
    let mut ack = Vec::new();
    encode(
        &Message { kind: FrameType::Response, prototype: 10, number, values: vec![Value::Int(1)] },
        &table,
        &mut ack,
    )
    .unwrap();
    link.handle_bytes(start + Duration::from_millis(1600), &ack);
    let resends = run_until(&mut link, start + Duration::from_millis(6000), &mut events, 10);
    assert_eq!(resends, 0);
    assert!(events.iter().any(
        |e| matches!(e, RdscomEvent::Acked { prototype: 10, latency, .. } if *latency == Duration::from_millis(1600))
    ));
    assert!(!events.iter().any(|e| matches!(e, RdscomEvent::Failed { .. })));
}

fn wait_for<T>(driver: &RdscomDriver, limit: Duration, mut found: impl FnMut(&DriverEvent) -> Option<T>) -> Option<T> {
    let until = Instant::now() + limit;
    while let Ok(event) = driver.events().recv_timeout(until.saturating_duration_since(Instant::now())) {
        if let Some(value) = found(&event) {
            return Some(value);
        }
    }
    None
}

fn start() -> (RdscomEmulator, RdscomDriver) {
    let emulator = RdscomEmulator::start(PrototypeTable::document()).unwrap();
    let driver =
        RdscomDriver::start(emulator.path().to_str().unwrap(), RdscomConfig::default(), PrototypeTable::document())
            .unwrap();
    (emulator, driver)
}

#[test]
fn link_settings_that_would_panic_or_spin_the_drivers_thread_are_refused_at_start() {
    let refused = |config: RdscomConfig| {
        RdscomDriver::start("/dev/null", config, PrototypeTable::document()).err().map(|error| error.to_string())
    };
    let defaults = RdscomConfig::default;
    let no_period = refused(RdscomConfig { heartbeat_period_s: 0.0, ..defaults() });
    assert_eq!(no_period.as_deref(), Some("link.heartbeat_period_s 0 outside 0.01 - 10"));
    for config in [
        RdscomConfig { retry_timeout_s: -1.0, ..defaults() },
        RdscomConfig { retry_timeout_s: f64::NAN, ..defaults() },
        RdscomConfig { heartbeat_misses: 0, ..defaults() },
        RdscomConfig { retries: u32::MAX, ..defaults() },
    ] {
        assert!(refused(config.clone()).is_some_and(|error| error.contains(" outside ")), "{config:?}");
    }
}

fn link_up(event: &DriverEvent) -> Option<()> {
    matches!(event, DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Up))).then_some(())
}

fn send(driver: &RdscomDriver, line: &str) {
    driver.send(parse_console_command(line, 7).unwrap()).unwrap();
}

#[test]
fn a_queued_two_motor_move_executes_on_go_and_control_done_is_acknowledged() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    send(&driver, "move 0 position 1.0");
    send(&driver, "move 1 position -0.5 simultaneous");
    send(&driver, "go");
    let table = PrototypeTable::document();
    let done = wait_for(&driver, Duration::from_secs(2), |event| match event {
        DriverEvent::Link(RdscomEvent::Received(message)) if message.prototype == 4 => Some(message.clone()),
        _ => None,
    })
    .expect("ControlDone");
    assert_eq!(done.kind, FrameType::Request);
    assert!(done.field(&table, "success").unwrap().as_bool());
    assert_eq!(done.field(&table, "executed").unwrap().as_f64(), 2.0);
    std::thread::sleep(Duration::from_millis(100));
    let stats = emulator.stats();
    assert_eq!((stats.controls_queued, stats.control_done_sent, stats.acks_received), (2, 1, 1));
}

#[test]
fn an_unplugged_mcu_takes_the_link_down_at_once() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(3), link_up).expect("link up");
    emulator.stop();
    let lost = wait_for(&driver, Duration::from_secs(1), |event| {
        matches!(event, DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Lost))).then_some(())
    });
    assert!(lost.is_some(), "the link stayed up without its port");
}

#[test]
fn a_dropped_acknowledgement_is_retried_and_succeeds() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    emulator.drop_next_responses(1);
    send(&driver, "clear");
    let events: Vec<DriverEvent> =
        std::iter::from_fn(|| driver.events().recv_timeout(Duration::from_millis(1500)).ok())
            .take_while(|event| !matches!(event, DriverEvent::Link(RdscomEvent::Acked { prototype: 8, .. })))
            .collect();
    assert!(
        events.iter().any(|e| matches!(e, DriverEvent::Link(RdscomEvent::Resent { prototype: 8, attempt: 1, .. }))),
        "{events:?}"
    );
    assert!(!events.iter().any(|e| matches!(e, DriverEvent::Link(RdscomEvent::Failed { .. }))));
}

#[test]
fn an_mcu_that_never_answers_produces_a_failure_after_exactly_three_retries() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    emulator.set_faults(RdscomFaults { silent: true, ..RdscomFaults::default() });
    let lost = wait_for(&driver, Duration::from_secs(1), |e| {
        matches!(e, DriverEvent::Link(RdscomEvent::StateChanged(RdscomLinkState::Lost))).then_some(())
    });
    assert!(lost.is_some(), "heartbeat loss changes the link state");
    send(&driver, "stop");
    let mut resends = Vec::new();
    let failed = wait_for(&driver, Duration::from_secs(6), |event| match event {
        DriverEvent::Link(RdscomEvent::Resent { prototype: 10, attempt, .. }) => {
            resends.push(*attempt);
            None
        }
        DriverEvent::Link(RdscomEvent::Failed { prototype: 10, .. }) => Some(()),
        _ => None,
    });
    assert!(failed.is_some(), "the request is reported failed");
    assert_eq!(resends, vec![1, 2, 3]);
    emulator.set_faults(RdscomFaults::default());
    wait_for(&driver, Duration::from_secs(1), link_up).expect("the link comes back with the MCU");
}

#[test]
fn datastreams_arrive_at_the_requested_rate_even_with_garbage_and_end_in_payloads() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    emulator.set_faults(RdscomFaults { garbage_between_frames: 12, end_in_payload: true, ..RdscomFaults::default() });
    send(&driver, "stream all 50");
    let table = PrototypeTable::document();
    let expected = f64::from(f32::from_le_bytes(*b"END@"));
    let until = Instant::now() + Duration::from_secs(1);
    let mut samples = 0;
    while let Some(data) = wait_for(&driver, until.saturating_duration_since(Instant::now()), |event| match event {
        DriverEvent::Link(RdscomEvent::Received(message)) if message.prototype == 6 => message.field(&table, "data"),
        _ => None,
    }) {
        assert_eq!(data.as_f64(), expected);
        samples += 1;
    }
    // 4 joints at 50 Hz for 1 s, give or take the start and end.
    assert!((180..=210).contains(&samples), "{samples} samples");
    send(&driver, "unstream all");
    std::thread::sleep(Duration::from_millis(200));
    let streamed = emulator.stats().datastream_frames;
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(emulator.stats().datastream_frames, streamed, "the stream stopped");
}

#[test]
fn the_mcus_error_requests_are_acknowledged() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    emulator.raise_error(42);
    let table = PrototypeTable::document();
    let code = wait_for(&driver, Duration::from_secs(1), |event| match event {
        DriverEvent::Link(RdscomEvent::Received(message)) if message.prototype == 9 => {
            message.field(&table, "error_code")
        }
        _ => None,
    });
    assert_eq!(code.map(|value| value.as_f64()), Some(42.0));
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(emulator.stats().acks_received, 1);
}

#[test]
fn a_command_with_a_nan_or_infinite_target_is_refused_and_never_reaches_the_mcu() {
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    for line in ["move 0 position nan", "move 1 velocity inf", "move 2 torque -inf simultaneous"] {
        let refused = driver.send(parse_console_command(line, 7).unwrap()).expect_err(line);
        assert!(
            matches!(&refused, EncodeError::OutOfRange { field, .. } if field == "control_value"),
            "{line}: {refused}"
        );
    }
    send(&driver, "move 0 position 1.0");
    send(&driver, "go");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(emulator.stats().controls_queued, 1, "only the finite move reached the MCU");
}

#[test]
fn console_commands_become_requests() {
    let request = parse_console_command("move 2 position 1.5 simultaneous", 0).unwrap();
    assert_eq!(
        request,
        Request {
            prototype: "MotorControl".into(),
            values: vec![Value::Int(2), Value::Int(0), Value::Float(1.5), Value::Bool(true)]
        }
    );
    assert_eq!(parse_console_command("stream all 100", 0).unwrap().values, vec![Value::Int(255), Value::Int(100)]);
    assert!(parse_console_command("stream all 1000", 0).is_err());
    assert!(parse_console_command("move 1 sideways 2", 0).is_err());
    assert!(parse_console_command("dance", 0).is_err());
}

/// docs/rdscom.md's table of every prototype, as the built-in tables hold them: for each of
/// "document" and "firmware", (id, name, "field type, ...", ack).
fn documented_prototypes() -> Vec<(String, u8, String, String, bool)> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/rdscom.md")).unwrap();
    let mut rows = Vec::new();
    for line in page.lines().filter(|line| line.starts_with("| ") && line.split('|').nth(1).is_some()) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(id) = cells[1].parse::<u8>() else { continue };
        let tables: &[&str] = match cells[5] {
            "document" => &["document"],
            "firmware" => &["firmware"],
            _ => &["document", "firmware"],
        };
        for table in tables {
            rows.push(((*table).to_owned(), id, cells[2].to_owned(), cells[3].to_owned(), cells[4] == "yes"));
        }
    }
    rows
}

#[test]
fn docs_rdscom_md_lists_every_prototype_of_both_tables_as_the_code_has_it() {
    let documented = documented_prototypes();
    for (name, table) in [("document", PrototypeTable::document()), ("firmware", PrototypeTable::firmware())] {
        let mut in_code = Vec::new();
        for id in 0..=u8::MAX {
            let Some(prototype) = table.get(id) else { continue };
            let fields: Vec<String> = prototype
                .fields
                .iter()
                .map(|field| format!("{} {}", field.name, serde_json::to_value(field.kind).unwrap().as_str().unwrap()))
                .collect();
            in_code.push((name.to_owned(), id, prototype.name.clone(), fields.join(", "), prototype.ack));
        }
        let on_page: Vec<_> = documented.iter().filter(|row| row.0 == name).cloned().collect();
        assert_eq!(on_page, in_code, "docs/rdscom.md's {name} table");
    }
}

#[test]
fn a_velocity_control_turns_its_joint_until_the_nodes_guard_stops_the_mcu_short_of_its_limit() {
    use arm_hil::nodes::arduino::{joint_sample, requests_from_joint_command, TestbenchSetpoints};
    let (emulator, driver) = start();
    wait_for(&driver, Duration::from_secs(1), link_up).expect("heartbeats answered");
    let table = PrototypeTable::document();
    let mut setpoints = TestbenchSetpoints::heard_at(50);
    let clock = Instant::now();
    let now_ns = || clock.elapsed().as_nanos() as u64;
    send(&driver, "stream all 50");
    // Every event goes through the setpoints, as the node's do; its Stops go out.
    let (mut highest, mut stopped_at) = (0.0f64, None);
    let mut hear = |setpoints: &mut TestbenchSetpoints, event: &DriverEvent, stopped_at: &mut Option<f64>| {
        let sample = match event {
            DriverEvent::Link(RdscomEvent::Received(message)) => joint_sample(message, &table),
            _ => None,
        };
        if let Some(sample) = sample.filter(|sample| sample.joint == 1) {
            highest = highest.max(sample.position);
        }
        for stop in setpoints.heard(now_ns(), event, &table) {
            stopped_at.get_or_insert(highest);
            driver.send(stop).unwrap();
        }
        sample.is_some()
    };
    // finger_joint1 at 2 rad/s from 0: pi/2 in 0.79 s without the guard (the MCU has no limit).
    let names: Vec<String> = (0..4).map(|joint| format!("finger_joint{joint}")).collect();
    let requests = requests_from_joint_command(&names[1..2], &[], &[2.0], &[], &names).unwrap();
    assert!(setpoints.check(&requests, now_ns()).unwrap_err().contains("datastream"), "not before it is heard");
    wait_for(&driver, Duration::from_secs(1), |event| hear(&mut setpoints, event, &mut stopped_at).then_some(()));
    wait_for(&driver, Duration::from_millis(100), |event| hear(&mut setpoints, event, &mut stopped_at).then_some(()));
    setpoints.check(&requests, now_ns()).unwrap();
    for request in &requests {
        driver.send(request.clone()).unwrap();
    }
    setpoints.others_sent(&requests, now_ns());
    send(&driver, "go");
    let until = Instant::now() + Duration::from_secs(2);
    while let Ok(event) = driver.events().recv_timeout(until.saturating_duration_since(Instant::now())) {
        hear(&mut setpoints, &event, &mut stopped_at);
    }
    let stopped_at = stopped_at.expect("the guard stopped the MCU");
    assert!(stopped_at > 1.2, "stopped early, at {stopped_at} rad");
    assert!(highest < std::f64::consts::FRAC_PI_2, "the joint passed its limit: {highest} rad");
    assert!(highest - stopped_at < 0.1, "it went on {} rad after the stop", highest - stopped_at);
    assert_eq!(emulator.stats().stops, 1);
}

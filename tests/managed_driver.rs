//! stm32_driver's managed-node logic without ROS, against the firmware emulator through a real
//! pseudo-terminal, its topics recorded into a bag: configure waits for the device, commands
//! flow only while active, a device that goes away is a fault, and error processing releases it.

use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arm_hil::bag::info::BagInfo;
use arm_hil::bag::metadata::BagDistro;
use arm_hil::bag::BagWriter;
use arm_hil::emulate::stm32::{Faults, Stm32Emulator, Stm32EmulatorConfig};
use arm_hil::nodes::lifecycle::{Fault, Managed, Outcome, Step};
use arm_hil::nodes::managed_driver::ManagedDriver;
use arm_hil::nodes::stm32::topics::Stm32Topics;
use arm_hil::nodes::stm32::{Stm32Arm, Stm32NodeConfig};
use arm_hil::outputs::{wall_clock_ns, NodeName, Outputs};
use arm_hil::protocol::stm32::{Command, ControlMode};

fn tempdir() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "arm_hil_managed_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// stm32_driver's managed logic for the device at `port`, recording into the bag `bag`.
fn stm32_node(port: &str, bag: &std::path::Path) -> (ManagedDriver<Stm32Arm, BagWriter>, Receiver<Fault>) {
    let config = Stm32NodeConfig { port: port.to_owned(), ..Stm32NodeConfig::default() };
    let mut out = Outputs::new(NodeName::new("stm32_driver"), BagWriter::create(bag, BagDistro::Jazzy).unwrap());
    let topics =
        Stm32Topics::advertise(&mut out, port, config.joint_names.clone(), config.imu_frame_id.clone()).unwrap();
    let arm = Stm32Arm {
        port: port.to_owned(),
        link: config.link.clone(),
        config: Arc::new(Mutex::new(config)),
        angles: Mutex::new(None),
    };
    let (faults, device_faults) = channel();
    (ManagedDriver::new(arm, (topics, out), faults, Arc::new(wall_clock_ns)), device_faults)
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

#[test]
fn configure_waits_for_telemetry_and_targets_flow_only_while_active() {
    let emulator = Stm32Emulator::start(Stm32EmulatorConfig::default()).unwrap();
    let dir = tempdir();
    let (mut node, _) = stm32_node(emulator.path().to_str().unwrap(), &dir.join("bag"));
    let commanding = node.commanding();
    assert_eq!(node.on(Step::Configure), Outcome::Success);
    assert!(commanding.get().is_err_and(|reason| reason.contains("not active")));
    // The firmware acknowledges every command but the telemetry polls.
    assert_eq!(emulator.stats().acks_sent, 0, "configuring sent the gains or mode");

    assert_eq!(node.on(Step::Activate), Outcome::Success);
    assert!(wait_until(Duration::from_secs(2), || emulator.stats().mode == Some(ControlMode::Position)));
    commanding.get().unwrap().send(Command::SetJointAngles { shoulder: 0.4, elbow: -0.2 }).unwrap();
    let reached = |targets: [f64; 2]| (targets[0] - 0.4).abs() < 1e-6 && (targets[1] + 0.2).abs() < 1e-6;
    assert!(wait_until(Duration::from_secs(2), || reached(emulator.stats().targets)));

    assert_eq!(node.on(Step::Deactivate), Outcome::Success);
    assert!(commanding.get().is_err(), "a deactivated node hands out its commander");
    assert_eq!(node.on(Step::Cleanup), Outcome::Success);
    // The driver's last word, a hold where the joints are, is on its way to the firmware.
    std::thread::sleep(Duration::from_millis(50));
    let polled = emulator.stats().commands;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(emulator.stats().commands, polled, "the port is still polled after cleanup");

    drop(node);
    let info = BagInfo::read(&dir.join("bag")).unwrap();
    let count = |name: &str| info.topics.iter().find(|topic| topic.name == name).map_or(0, |topic| topic.count);
    assert!(count("/joint_states") > 0, "no joint states while configured");
    assert!(count("/diagnostics") >= 1);
}

#[test]
fn configure_without_an_answer_fails_releases_the_port_and_can_be_tried_again() {
    let emulator = Stm32Emulator::start(Stm32EmulatorConfig::default()).unwrap();
    emulator.set_faults(Faults { silent: true, ..Faults::default() });
    let dir = tempdir();
    let (mut node, _) = stm32_node(emulator.path().to_str().unwrap(), &dir.join("bag"));
    let started = Instant::now();
    match node.on(Step::Configure) {
        Outcome::Failure(reason) => assert!(reason.contains("did not answer"), "{reason}"),
        other => panic!("configure against a silent device: {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(4), "configure took {:?}", started.elapsed());
    assert!(node.commanding().get().is_err());
    emulator.set_faults(Faults::default());
    assert_eq!(node.on(Step::Configure), Outcome::Success, "the topics came back for the next try");
}

#[test]
fn a_device_that_goes_away_is_a_fault_and_error_processing_releases_it() {
    let emulator = Stm32Emulator::start(Stm32EmulatorConfig::default()).unwrap();
    let dir = tempdir();
    let (mut node, faults) = stm32_node(emulator.path().to_str().unwrap(), &dir.join("bag"));
    assert_eq!(node.on(Step::Configure), Outcome::Success);
    assert_eq!(node.on(Step::Activate), Outcome::Success);
    emulator.unplug();
    let Fault::Device(reason) = faults.recv_timeout(Duration::from_secs(5)).expect("no fault reported") else {
        panic!("a device fault")
    };
    assert!(reason.contains("stopped answering") || reason.contains("port"), "{reason}");
    assert_eq!(node.on(Step::Recover), Outcome::Success);
    assert!(node.commanding().get().is_err(), "commands flow with the device away");
    emulator.replug();
    assert_eq!(node.on(Step::Configure), Outcome::Success);
    assert_eq!(node.on(Step::Activate), Outcome::Success);
}

//! Each node decides once what it publishes: the node's publisher, configured as the r2r node
//! configures it (robot_state_publisher beside it), and as the command line configures it for a
//! bag (robot_state_publisher's topics in the bag), gives the same messages from the same
//! input, /diagnostics included; and port-5555 sessions that overlap each get their own joints.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arm_hil::bag::metadata::BagDistro;
use arm_hil::bag::BagWriter;
use arm_hil::bridge::legacy::{LegacyServer, LegacyServerConfig, SessionObserver};
use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Waypoint;
use arm_hil::hil::{feed_trajectory, FrameChannel, HilConfig, HilLoop, LoopStatus, SimulatedRig};
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::msg::JointState;
use arm_hil::nodes::hil::publisher::{publish_loop, HilEvent, HilPublisher};
use arm_hil::nodes::joints::universal_angles;
use arm_hil::nodes::legacy::recording::{AllSessions, SessionBags};
use arm_hil::nodes::legacy::LegacyBridgeSettings;
use arm_hil::nodes::load_trajectory;
use arm_hil::nodes::robot_state::{Urdf, ARM_URDF};
use arm_hil::nodes::sil::publisher::SilPublisher;
use arm_hil::nodes::sil::run::{run_sil, SilEvent};
use arm_hil::nodes::sil::SilNodeSettings;
use arm_hil::outputs::{NodeName, Outputs, Publisher, PublisherThread};
use arm_hil::protocol::legacy::{encode_request, Mode, Request};
use arm_hil::sim::{Frame, SilConfig};

/// What robot_state_publisher publishes beside a node, and a bag holds in its place.
const ROBOT_STATE_TOPICS: [&str; 3] = ["/robot_description", "/tf_static", "/tf"];

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("arm_hil_publish_once_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A bag's messages in order: topic, and CDR.
fn messages(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .find(|path| path.extension().is_some_and(|ext| ext == "mcap"))
        .expect("an MCAP file");
    let bytes = std::fs::read(file).unwrap();
    mcap::MessageStream::new(&bytes)
        .unwrap()
        .map(|message| {
            let message = message.unwrap();
            (message.channel.topic.clone(), message.data.into_owned())
        })
        .collect()
}

/// Each topic's messages, in order.
fn by_topic(messages: &[(String, Vec<u8>)]) -> BTreeMap<&str, Vec<&[u8]>> {
    let mut topics: BTreeMap<&str, Vec<&[u8]>> = BTreeMap::new();
    for (topic, data) in messages {
        topics.entry(topic.as_str()).or_default().push(data);
    }
    topics
}

/// The node's messages and the bag's are the same, topic by topic, message for message; the
/// bag has robot_state_publisher's topics besides.
fn assert_same_messages(node: &[(String, Vec<u8>)], bag: &[(String, Vec<u8>)]) {
    let (node, mut bag) = (by_topic(node), by_topic(bag));
    for topic in ROBOT_STATE_TOPICS {
        assert!(bag.remove(topic).is_some(), "the bag holds {topic}");
    }
    assert_eq!(node.keys().collect::<Vec<_>>(), bag.keys().collect::<Vec<_>>(), "the same topics");
    assert!(node["/diagnostics"].len() >= 2, "a status at the start and at the end at least");
    for (topic, messages) in &node {
        assert_eq!(messages.len(), bag[topic].len(), "{topic}: as many messages");
        assert!(messages.iter().zip(&bag[topic]).all(|(a, b)| a == b), "{topic}: the same payloads");
    }
}

#[test]
fn sil_node_and_arm_hil_sil_bag_publish_the_same_run_alike() {
    // The command line's bag of the built-in arc, on simulated time.
    let cli_dir = tempdir("sil_cli");
    let status = Command::new(env!("CARGO_BIN_EXE_arm_hil")).args(["sil", "--bag"]).arg(&cli_dir).output().unwrap();
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));

    // sil_node's run loop and publisher on the same run, as the node sets them up with
    // publish_clock (the stamps are then simulated time, as the bag's).
    let node_dir = tempdir("sil_node");
    let robot = Robot::default();
    let settings = SilNodeSettings { real_time_factor: 0.0, publish_clock: true, ..SilNodeSettings::default() };
    let sink = BagWriter::create(&node_dir, BagDistro::Jazzy).unwrap();
    let mut out = Outputs::new(NodeName::new("sil_node"), sink);
    let mut publisher = SilPublisher::advertise(&mut out, robot.clone(), &settings, None, 0).unwrap();
    let first = Arc::new(load_trajectory(None, &robot).unwrap());
    let (_keep, requests) = channel();
    let stop = AtomicBool::new(false);
    run_sil(&robot, &SilConfig::default(), &Mutex::new(settings), first, &requests, &stop, &mut |event| {
        publisher.publish(&mut out, 0, Some(event)).unwrap();
        if let SilEvent::RunEnded { .. } = event {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    out.into_sink().finish().unwrap();

    assert_same_messages(&messages(&node_dir), &messages(&cli_dir));
    let _ = std::fs::remove_dir_all(&cli_dir);
    let _ = std::fs::remove_dir_all(&node_dir);
}

#[test]
fn hil_node_and_arm_hil_hil_bag_publish_the_same_loop_alike() {
    // One HIL run on the simulated plant; its events, as the publishing thread hands them on.
    let robot = Robot::default();
    let trajectory = load_trajectory(None, &robot).unwrap();
    let first = trajectory.waypoints()[0];
    let sil = SilConfig::default();
    let hardware = SimulatedRig::new(robot.clone(), &sil, &first, robot.elbow()).unwrap();
    let (frames_tx, frames) = sync_channel(100_000);
    let figures = Arc::new(Mutex::new(LoopStatus::default()));
    let config = HilConfig { realtime_priority: None, ..HilConfig::default() };
    let stop = Arc::new(AtomicBool::new(false));
    let feed = feed_trajectory(Arc::new(trajectory));
    let hil = HilLoop::new(config, &sil, robot.elbow(), robot.params().l_arm, Box::new(hardware), feed, stop)
        .unwrap()
        .with_max_duration(1.5)
        .with_frames(Box::new(FrameChannel::new(frames_tx, 1)))
        .with_status(figures.clone());
    let run = std::thread::spawn(move || hil.run());
    let mut events = vec![(1, HilEvent::LoopStarted)];
    let mut time_ns = 1;
    let snapshot = || figures.lock().map(|figures| *figures).unwrap_or_default();
    publish_loop(&frames, &AtomicBool::new(false), snapshot, |event| {
        // Each event at the trajectory time of the frame it carries, or of the last frame before
        // it: periods that a busy machine made the loop skip leave the run's span, and so its
        // statuses, as they are.
        if let HilEvent::Frame { frame, .. } = &event {
            time_ns = time_ns.max((frame.t * 1e9) as u64 + 1);
        }
        events.push((time_ns, event));
    });
    assert!(run.join().unwrap().outcome.is_ok());
    assert!(events.iter().any(|(_, event)| matches!(event, HilEvent::Figures(_))));

    // The node's publisher (robot_state_publisher beside it) and the command line's, on its
    // own thread with robot_state_publisher's topics, take the same events.
    let publish = |dir: &Path, robot_state: Option<&Urdf>| {
        let sink = BagWriter::create(dir, BagDistro::Jazzy).unwrap();
        let mut out = Outputs::new(NodeName::new("hil_node"), sink);
        let mut publisher =
            HilPublisher::advertise(&mut out, robot.clone(), "base_link", 250.0, "sim", robot_state, 0).unwrap();
        for (time_ns, event) in &events {
            publisher.event(&mut out, *time_ns, Some(event)).unwrap();
        }
        out.into_sink().finish().unwrap();
    };
    let (node_dir, cli_dir) = (tempdir("hil_node"), tempdir("hil_cli"));
    publish(&node_dir, None);
    let urdf = Urdf::parse(ARM_URDF).unwrap();
    let cli_robot = robot.clone();
    let mut thread = PublisherThread::spawn(BagWriter::create(&cli_dir, BagDistro::Jazzy).unwrap(), "hil_node", {
        move |out| HilPublisher::advertise(out, cli_robot, "base_link", 250.0, "sim", Some(&urdf), 0)
    })
    .unwrap();
    for (time_ns, event) in events {
        thread.event(time_ns, event);
    }
    thread.finish(time_ns).unwrap();
    assert_same_messages(&messages(&node_dir), &messages(&cli_dir));
    let _ = std::fs::remove_dir_all(&cli_dir);
    let _ = std::fs::remove_dir_all(&node_dir);
}

/// hil_node's publisher into a bag at `dir`, its loop started at 0.
fn hil_loop_into_bag(dir: &Path) -> (Outputs<BagWriter>, HilPublisher) {
    let mut out = Outputs::new(NodeName::new("hil_node"), BagWriter::create(dir, BagDistro::Jazzy).unwrap());
    let mut publisher =
        HilPublisher::advertise(&mut out, Robot::default(), "base_link", 250.0, "sim", None, 0).unwrap();
    publisher.event(&mut out, 0, Some(&HilEvent::LoopStarted)).unwrap();
    (out, publisher)
}

/// A loop that overruns every second says so in its status each second: the status still goes
/// out once a second (with its figures), not once for its schedule and once for the change.
#[test]
fn hil_nodes_loop_status_goes_out_once_a_second_when_its_overruns_change_each_second() {
    let dir = tempdir("hil_status");
    let (mut out, mut publisher) = hil_loop_into_bag(&dir);
    let mut figures = LoopStatus::default();
    for ms in 1..=4_500u64 {
        let time_ns = ms * 1_000_000;
        // The passing of time comes before the figures at each millisecond.
        publisher.event(&mut out, time_ns, None).unwrap();
        if ms % 100 == 0 {
            figures.overruns += ms / 100;
            publisher.event(&mut out, time_ns, Some(&HilEvent::Figures(figures))).unwrap();
        }
    }
    out.into_sink().finish().unwrap();
    let statuses = messages(&dir).iter().filter(|(topic, _)| topic == "/diagnostics").count();
    assert_eq!(statuses, 5, "at the start, then with the figures at 1, 2, 3 and 4 s");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A SIL request for an arc about the forearm pivoting at `elbow`.
fn request_about(elbow: Vec3) -> (Vec<u8>, Vec<Waypoint>) {
    let spec = ArcSpec { from_deg: [65.0, -150.0], to_deg: [65.0, -148.0], ..ArcSpec::default() };
    let waypoints = spec.waypoints(&elbow, 0.45).unwrap();
    let mut bytes = Vec::new();
    encode_request(&Request { mode: Mode::Sil, elbow, l_arm: 0.45, waypoints: waypoints.clone() }, &mut bytes);
    (bytes, waypoints)
}

/// A /joint_states message from its CDR (after the 4-byte encapsulation header).
fn joint_state(cdr: &[u8]) -> JointState {
    cdr_encoding::from_bytes::<JointState, byteorder::LittleEndian>(&cdr[4..]).unwrap().0
}

/// The elbow that a /joint_states message's forearm angles point from, of `elbows`.
fn elbow_of(message: &[u8], elbows: &[Vec3]) -> usize {
    let joints = joint_state(message);
    let platform = Vec3::new(joints.position[9], joints.position[10], joints.position[11]);
    let forearm = (joints.position[12], joints.position[13]);
    let matches: Vec<usize> = (0..elbows.len())
        .filter(|&i| {
            let (yaw, pitch) = universal_angles(&(platform - elbows[i]));
            (yaw - forearm.0).abs() < 1e-9 && (pitch - forearm.1).abs() < 1e-9
        })
        .collect();
    assert_eq!(matches.len(), 1, "the forearm points from exactly one of the elbows");
    matches[0]
}

#[test]
fn overlapping_port_5555_sessions_each_get_their_own_elbow_on_joint_states() {
    let robot = Robot::default();
    let elbows = [robot.elbow(), robot.elbow() + Vec3::new(0.02, -0.01, 0.0)];
    let (bags_dir, all_dir) = (tempdir("sessions"), tempdir("all_sessions"));
    let settings = LegacyBridgeSettings::default();
    let (address_tx, address_rx) = channel();
    let (all_tx, all_rx) = channel();
    {
        let (bags_dir, all_dir, robot) = (bags_dir.clone(), all_dir.clone(), robot.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let config =
                    LegacyServerConfig { bind: SocketAddr::from(([127, 0, 0, 1], 0)), ..LegacyServerConfig::default() };
                let server = LegacyServer::bind(config, SilConfig::default(), None).await.unwrap();
                let address = server.local_addr().unwrap();
                let bags = SessionBags::observer(&bags_dir, BagDistro::Jazzy, robot.clone(), settings.clone(), address);
                // The live view's recording, into a bag here: the same publisher, another sink.
                let all = BagWriter::create(&all_dir, BagDistro::Jazzy).unwrap();
                let (all, observer) = AllSessions::start(all, robot, &settings, address).unwrap();
                let observers: Vec<Arc<dyn SessionObserver>> = vec![bags.unwrap(), observer];
                address_tx.send(address).unwrap();
                all_tx.send(all).unwrap();
                server.with_observer(Arc::new(observers)).serve().await
            })
        });
    }
    let address = address_rx.recv().unwrap();
    let all = all_rx.recv().unwrap();
    // Both sessions are open, their requests sent, before either is read.
    let mut clients: Vec<TcpStream> = elbows
        .iter()
        .map(|elbow| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            stream.write_all(&request_about(*elbow).0).unwrap();
            stream
        })
        .collect();
    let readers: Vec<_> = clients
        .drain(..)
        .map(|mut stream| {
            std::thread::spawn(move || {
                let mut all = Vec::new();
                stream.read_to_end(&mut all).unwrap();
                all.len()
            })
        })
        .collect();
    for reader in readers {
        assert!(reader.join().unwrap() > 0);
    }
    // The session bags are finished as their sessions end.
    let session_dirs = || -> Vec<PathBuf> {
        std::fs::read_dir(&bags_dir).map_or(Vec::new(), |dirs| dirs.map(|dir| dir.unwrap().path()).collect())
    };
    for _ in 0..100 {
        if session_dirs()
            .iter()
            .all(|dir| std::fs::read_to_string(dir.join("metadata.yaml")).is_ok_and(|m| m.contains("message_count")))
            && session_dirs().len() == 2
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    all.finish().unwrap().unwrap();

    let joint_states = |dir: &Path| -> Vec<Vec<u8>> {
        messages(dir).into_iter().filter(|(topic, _)| topic == "/joint_states").map(|(_, data)| data).collect()
    };
    // The live recording: both sessions, each message with its own session's elbow.
    let seen: Vec<usize> = joint_states(&all_dir).iter().map(|message| elbow_of(message, &elbows)).collect();
    assert!(seen.contains(&0) && seen.contains(&1), "both sessions are on /joint_states");
    assert!(seen.windows(2).any(|pair| pair[0] != pair[1]), "the sessions overlapped");
    // Each session's bag: that session's elbow only.
    let mut per_bag: Vec<usize> = session_dirs()
        .iter()
        .map(|dir| {
            let elbows_seen: Vec<usize> = joint_states(dir).iter().map(|message| elbow_of(message, &elbows)).collect();
            assert!(!elbows_seen.is_empty());
            assert!(elbows_seen.windows(2).all(|pair| pair[0] == pair[1]), "one elbow a bag");
            elbows_seen[0]
        })
        .collect();
    per_bag.sort();
    assert_eq!(per_bag, [0, 1]);
    let _ = std::fs::remove_dir_all(&bags_dir);
    let _ = std::fs::remove_dir_all(&all_dir);
}

/// hil_node's arm topics are stamped with the time the loop took each frame, not the time the
/// publishing thread took it up: a thread that falls behind and catches up (a loaded pass saw
/// 280 /joint_states a second of a 250 Hz loop that way) keeps the loop's spacing, whatever
/// each frame then waits for the publisher.
#[test]
fn hil_nodes_joint_states_are_stamped_when_the_loop_took_each_frame() {
    let dir = tempdir("hil_stamps");
    let (mut out, mut publisher) = hil_loop_into_bag(&dir);
    // Ten frames 4 ms apart of loop time, all taken up at 1 s, the first taken 36 ms before;
    // each then waits 0 - 8 ms for the publisher, whose clock reads that much later.
    for k in 0..10u64 {
        let frame = Frame { t: k as f64 * 0.004, ..Frame::default() };
        let mut event = HilEvent::Frame { frame, loop_number: 1, age_ns: (9 - k) * 4_000_000 };
        let waited = Duration::from_millis(k % 3 * 4);
        event.waited(waited);
        publisher.event(&mut out, 1_000_000_000 + waited.as_nanos() as u64, Some(&event)).unwrap();
    }
    out.into_sink().finish().unwrap();
    let taken_ns: Vec<i64> = (0..10).map(|k| 964_000_000 + k * 4_000_000).collect();
    assert_eq!(joint_state_stamps_ns(&dir), taken_ns);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The header stamps of the /joint_states in the bag at `dir` [ns].
fn joint_state_stamps_ns(dir: &Path) -> Vec<i64> {
    messages(dir)
        .iter()
        .filter(|(topic, _)| topic == "/joint_states")
        .map(|(_, cdr)| {
            let joints = joint_state(cdr);
            i64::from(joints.header.stamp.sec) * 1_000_000_000 + i64::from(joints.header.stamp.nanosec)
        })
        .collect()
}

/// sil_node's /joint_states are stamped when each frame was due in real time, not when a
/// simulation thread that fell behind (a loaded machine) caught up with it (a loaded pass saw
/// 113 a second of 100 that way), nor when the frame got the publisher (a loaded pass saw a
/// stamp go back).
#[test]
fn sil_nodes_joint_states_are_stamped_when_each_frame_was_due() {
    let dir = tempdir("sil_stamps");
    let mut out = Outputs::new(NodeName::new("sil_node"), BagWriter::create(&dir, BagDistro::Jazzy).unwrap());
    let settings = SilNodeSettings { publish_rate_hz: 250.0, ..SilNodeSettings::default() };
    let mut publisher = SilPublisher::advertise(&mut out, Robot::default(), &settings, None, 0).unwrap();
    // Ten frames 4 ms apart of simulated time, all handed on at 1 s, the first due 36 ms before;
    // each then waits 0 - 8 ms for the publisher, whose clock reads that much later.
    for k in 0..10u64 {
        let frame = Frame { t: k as f64 * 0.004, ..Frame::default() };
        let late_ns = (9 - k) * 4_000_000;
        let event = SilEvent::Frame { frame, clock_s: frame.t, publish_rate_hz: 250.0, late_ns };
        let waited = Duration::from_millis(k % 3 * 4);
        let now_ns = 1_000_000_000 + waited.as_nanos() as u64;
        publisher.publish(&mut out, now_ns, Some(&event.later_by(waited))).unwrap();
    }
    out.into_sink().finish().unwrap();
    let due_ns: Vec<i64> = (0..10).map(|k| 964_000_000 + k * 4_000_000).collect();
    assert_eq!(joint_state_stamps_ns(&dir), due_ns);
    let _ = std::fs::remove_dir_all(&dir);
}

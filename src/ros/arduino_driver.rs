//! arduino_driver: the finger testbench's MCU over rdscom as a managed ROS 2 node (see
//! [`crate::nodes::arduino`]: configure opens the port, waits for the MCU to acknowledge a
//! heartbeat and starts its datastream; activate lets commands through; deactivate stops the
//! MCU's controls).

use std::path::Path;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::sensor_msgs::msg::JointState;
use r2r::std_msgs::msg::Empty;
use r2r::QosProfile;

use super::lifecycle::{spin_managed, Supervisor};
use super::params::{nothing_at_run_time, serve_parameters};
use super::{end_joint_goal, node_params, now_ns, ros_outputs, JointGoalHandle};
use crate::drivers::rdscom::{prototype_table, DriverEvent, RdscomCommander, Request};
use crate::nodes::arduino::topics::ArduinoTopics;
use crate::nodes::arduino::{
    arduino_node_config, follower, requests_from_joint_command, send_line, state_max_age_ns, ArduinoNodeConfig,
    Testbench, TestbenchSetpoints, ARDUINO_NODE_PARAMS,
};
use crate::nodes::follower::clocks::{Now, SteadyClock};
use crate::nodes::follower::goals::{DeviceGoals, Setpoint};
use crate::nodes::follower::stream_gate::in_device_order;
use crate::nodes::follower::JointState as JointStateData;
use crate::nodes::managed_driver::{Commanding, ManagedDriver, Observer};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::refusals::Refusals;
use crate::protocol::rdscom::PrototypeTable;

/// Sends `line` if the node is active; says why not otherwise. Whether it went.
fn send(commanding: &Commanding<RdscomCommander>, line: &str) -> bool {
    let sent = commanding.get().and_then(|commander| send_line(&commander, line));
    if let Err(error) = &sent {
        log::error!("`{line}` refused: {error}");
    }
    sent.is_ok()
}

/// What the running driver's events command: a setpoint waiting for the MCU's ControlDone goes
/// out with it, and each round of the datastream is a control step of `follow` (none in the
/// doc-only type-check), timed on the `steady` clock.
fn drive_setpoints(
    setpoints: Arc<Mutex<TestbenchSetpoints>>,
    commanding: Commanding<RdscomCommander>,
    table: PrototypeTable,
    steady: SteadyClock,
    follow: impl Fn(Now, JointStateData, bool) -> Option<Setpoint> + Send + Sync + 'static,
) -> Observer<DriverEvent> {
    Arc::new(move |event, time_ns| {
        let Ok(mut setpoints) = setpoints.lock() else { return };
        let commander = commanding.get();
        let now = Now { ros_ns: time_ns, steps_ns: steady.now_ns() };
        let mut requests = setpoints.heard(now.steps_ns, event, &table);
        if let Some(actual) = setpoints.sample(event, &table) {
            if let Some(setpoint) = follow(now, actual, commander.is_ok()) {
                requests.extend(setpoints.setpoint(now.steps_ns, setpoint.positions().to_vec()));
            }
        }
        if !requests.is_empty() {
            if let Err(error) = commander.and_then(|commander| send_all(&commander, requests)) {
                setpoints.unsent();
                log::error!("setpoint refused: {error}");
            }
        }
    })
}

/// Sends `requests` in order, stopping at the first refused.
fn send_all(commander: &RdscomCommander, requests: Vec<Request>) -> Result<(), String> {
    requests.into_iter().try_for_each(|request| commander.send(request).map_err(|error| error.to_string()))
}

/// The node's FollowJointTrajectory goals and `~/joint_command` stream.
type Goals = Arc<Mutex<DeviceGoals<JointGoalHandle>>>;

/// Serves `~/follow_joint_trajectory` (and `~/controller_state`) on the node's `goals`: each
/// round of the datastream (every joint heard) while active is a control step, timed on the
/// `steady` clock, whose setpoint goes out as the four joints' position controls and
/// ControlGo, once the MCU has run the one before.
#[cfg(not(feature = "ros-doc-only"))]
fn follow_joint_trajectories(
    node: &mut r2r::Node,
    pool: &LocalPool,
    (goals, setpoints): (Goals, Arc<Mutex<TestbenchSetpoints>>),
    commanding: Commanding<RdscomCommander>,
    steady: SteadyClock,
) -> anyhow::Result<impl Fn(Now, JointStateData, bool) -> Option<Setpoint> + Send + Sync + 'static> {
    use super::joint_trajectory_action::FollowJointTrajectoryServer;

    use super::now_for_device;

    let clock = node.get_ros_clock();
    let (active, first_commanding) = (commanding.clone(), commanding);
    let active = Box::new(move || active.get().is_ok());
    let now = Box::new(move || now_for_device(&clock, &steady));
    // A goal's first setpoint goes out as it is accepted, not at the next datastream round:
    // the setpoints' lock first, then the goals', as the device's steps take them.
    let first_goals = goals.clone();
    let first_setpoint = Box::new(move || {
        let Ok(mut setpoints) = setpoints.lock() else { return };
        let Ok(commander) = first_commanding.get() else { return };
        let now_ns = steady.now_ns();
        let Some(setpoint) = first_goals.lock().ok().and_then(|mut goals| goals.goals.setpoint_now(now_ns)) else {
            return;
        };
        let requests = setpoints.setpoint(now_ns, setpoint.positions().to_vec());
        if let Err(error) = send_all(&commander, requests) {
            setpoints.unsent();
            log::error!("a goal's first setpoint refused: {error}");
        }
    });
    let server = FollowJointTrajectoryServer::serve(node, &pool.spawner(), goals.clone(), active, now, first_setpoint)?;
    Ok(move |now: Now, actual, active: bool| {
        let mut goals = goals.lock().ok()?;
        if !active {
            goals.goals.observe(now.steps_ns, actual);
            return None;
        }
        // Stamped on the ROS clock, as everything the node publishes.
        let tick = goals.goals.tick(now.steps_ns, actual).stamped(now.ros_ns);
        drop(goals);
        server.answer(tick)
    })
}

/// `~/joint_command` (sensor_msgs/JointState): MotorControl requests as the message says, or
/// under ros2_control a setpoint of the four positions paced by the MCU.
fn serve_joint_commands(
    node: &mut r2r::Node,
    pool: &LocalPool,
    config: &ArduinoNodeConfig,
    commanding: Commanding<RdscomCommander>,
    (setpoints, goals, steady): (Arc<Mutex<TestbenchSetpoints>>, Goals, SteadyClock),
) -> anyhow::Result<()> {
    let (joint_names, ros2_control) = (config.joint_names.clone(), config.ros2_control);
    let joint_commands = node.subscribe::<JointState>("~/joint_command", QosProfile::default())?;
    let (mut refusals, started) = (Refusals::default(), std::time::Instant::now());
    pool.spawner().spawn_local(joint_commands.for_each(move |message| {
        // The whole command under the setpoints' lock, which the device's steps hold too: no
        // goal's setpoint, computed or waiting, goes out between this command and its effects.
        let Ok(mut setpoints) = setpoints.lock() else { return futures::future::ready(()) };
        let requests = match ros2_control {
            true => setpoints.command(steady.now_ns(), &message.name, &message.position, &joint_names),
            false => requests_from_joint_command(
                &message.name,
                &message.position,
                &message.velocity,
                &message.effort,
                &joint_names,
            ),
        };
        let sent = requests.and_then(|requests| {
            setpoints.check(&requests, steady.now_ns())?;
            let commander = commanding.get();
            let mut goals = goals.lock().map_err(|_| "the node's goals are unavailable".to_owned())?;
            // Positions, velocities and efforts each in the device's order: a mode's command.
            let values: Vec<f64> = [&message.position, &message.velocity, &message.effort]
                .into_iter()
                .flat_map(|values| in_device_order(&message.name, values, &joint_names))
                .collect();
            goals.offer_command(&values, started.elapsed().as_secs_f64(), commander.is_ok())?;
            send_all(&commander?, requests.clone())?;
            // The command has the joints: the goal followed ends.
            end_joint_goal(goals.command_sent());
            Ok(requests)
        });
        match (ros2_control, &sent) {
            // A setpoint not sent: the next goes out even if it is the same.
            (true, Err(_)) => setpoints.unsent(),
            // MotorControl requests sent: their rates are watched, and no setpoint that waited
            // goes out after them.
            (false, Ok(requests)) => setpoints.others_sent(requests, steady.now_ns()),
            _ => {}
        }
        drop(setpoints);
        refusals.log("~/joint_command", sent.map(|_| ()));
        futures::future::ready(())
    }))?;
    Ok(())
}

/// Runs the node until interrupted or shut down.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = arduino_node_config(&node_params(&node)).context("arduino_driver parameters")?;
    let file = (!config.prototypes_file.is_empty()).then(|| Path::new(&config.prototypes_file));
    let table = prototype_table(file, &config.link.table)?;
    let topic_table = table.clone();
    let topics = ros_outputs(&mut node, |out| ArduinoTopics::advertise(out, &config.port, &config, topic_table))?;
    let testbench = Testbench {
        port: config.port.clone(),
        link: config.link.clone(),
        table: table.clone(),
        stream_rate_hz: config.stream_rate_hz,
    };
    let (faults, device_faults) = channel();
    let clock = node.get_ros_clock();
    let managed = ManagedDriver::new(testbench, topics, faults, Arc::new(move || now_ns(&clock)));
    let commanding = managed.commanding();

    let pool = LocalPool::new();
    let setpoints = Arc::new(Mutex::new(TestbenchSetpoints::heard_at(config.stream_rate_hz)));
    // Goals and the MCU's setpoints are timed on it, whatever /clock does under use_sim_time.
    let steady = SteadyClock::start();
    let goals = DeviceGoals::new(follower(&config).map_err(anyhow::Error::msg)?).from_ros2_control(config.ros2_control);
    let goals: Goals = Arc::new(Mutex::new(goals.with_state_max_age_ns(state_max_age_ns(&config))));
    // FollowJointTrajectory's types are control_msgs', which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow =
        follow_joint_trajectories(&mut node, &pool, (goals.clone(), setpoints.clone()), commanding.clone(), steady)?;
    #[cfg(feature = "ros-doc-only")]
    let follow = |_: Now, _: JointStateData, _: bool| None;
    let (stopping, stopping_setpoints) = (goals.clone(), setpoints.clone());
    let managed = managed
        .observed_by(drive_setpoints(setpoints.clone(), commanding.clone(), table, steady, follow))
        .stopping_with(Box::new(move |why| {
            // The goal first: no step sends a setpoint once the waiting one is forgotten.
            end_joint_goal(stopping.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).stopped(why));
            if let Ok(mut setpoints) = stopping_setpoints.lock() {
                setpoints.stopped();
            }
        }));
    let parameters = ParameterServer::new(node_params(&node), ARDUINO_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (stopped_setpoints, stopped_goals) = (setpoints.clone(), goals.clone());
    serve_joint_commands(&mut node, &pool, &config, commanding.clone(), (setpoints, goals, steady))?;
    for (topic, line) in [("~/go", "go"), ("~/stop", "stop"), ("~/clear", "clear")] {
        let requests = node.subscribe::<Empty>(topic, QosProfile::default())?;
        let (commanding, setpoints, goals) = (commanding.clone(), stopped_setpoints.clone(), stopped_goals.clone());
        pool.spawner().spawn_local(requests.for_each(move |_| {
            // A Stop ends every control and the goal followed: nothing moves until a new command.
            // Under the setpoints' lock, which the device's steps hold too: no setpoint of the
            // goal goes out after the Stop.
            let mut setpoints = setpoints.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            if line == "stop" {
                end_joint_goal(goals.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).stopped("~/stop"));
            }
            if send(&commanding, line) && line == "stop" {
                setpoints.stopped();
            }
            futures::future::ready(())
        }))?;
    }
    // A datastream fallen silent sends no event: the rate guard looks every 20 ms meanwhile.
    let mut quiet = node.create_wall_timer(std::time::Duration::from_millis(20))?;
    pool.spawner().spawn_local(async move {
        while quiet.tick().await.is_ok() {
            let Ok(mut setpoints) = stopped_setpoints.lock() else { continue };
            let stops = setpoints.idle(steady.now_ns());
            if stops.is_empty() {
                continue;
            }
            if let Err(error) = commanding.get().and_then(|commander| send_all(&commander, stops)) {
                log::error!("the MCU could not be stopped: {error}");
            }
        }
    })?;

    let supervisor = Supervisor {
        faults: device_faults,
        autostart: config.autostart,
        auto_recover: config.auto_recover,
        recover_protective_stops: false,
    };
    spin_managed(node, pool, managed, supervisor)
}

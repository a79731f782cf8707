//! hil_node: the HIL loop as a managed ROS 2 node (see [`crate::nodes::hil::managed`]), its
//! topics decided by [`crate::nodes::hil::publisher`], trajectory segments from ~/trajectory
//! and goals on ~/follow_cartesian_trajectory.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use futures::executor::LocalPool;
use futures::task::LocalSpawnExt;
use futures::StreamExt;
use r2r::trajectory_msgs::msg::MultiDOFJointTrajectory;
use r2r::QosProfile;

use super::lifecycle::{serve_lifecycle, Supervisor};
use super::params::{nothing_at_run_time, serve_parameters};
use super::publisher::NodePublisher;
use super::{multi_dof_points, node_params, spin};
use crate::hil::{LoopStatus, Withdrawals};
use crate::model::Robot;
#[cfg(not(feature = "ros-doc-only"))]
use crate::nodes::goals::GoalUpdate;
use crate::nodes::hil::feeder::FeedRequest;
use crate::nodes::hil::managed::{HilLinks, HilReporter, ManagedHil};
use crate::nodes::hil::publisher::{publish_loop, HilEvent, HilPublisher};
use crate::nodes::hil::{hil_node_config, HIL_NODE_PARAMS};
use crate::nodes::param_server::ParameterServer;
use crate::nodes::status::Level;
use crate::nodes::{load_trajectory, trajectory_file};
use crate::sim::Frame;

/// Where hil_node's state goes: its publisher, and the goal served.
struct NodeReporter {
    publisher: Arc<NodePublisher<HilPublisher>>,
    goals: Arc<GoalsOfFrames>,
}

/// The goal served, told of each frame (Ok, and whether it is published) or of the loop's end.
type GoalsOfFrames = dyn Fn(Result<&Frame, &str>, bool) + Send + Sync;

impl HilReporter for NodeReporter {
    fn status(&self, level: Level, message: String) {
        self.publisher.event(&HilEvent::Status(level, message));
    }

    fn loop_started(&self) {
        self.publisher.event(&HilEvent::LoopStarted);
    }

    fn loop_stopped(&self, failure: Option<&str>) {
        (self.goals)(Err(failure.unwrap_or("the HIL loop stopped")), true);
    }
}

/// Runs the node until interrupted or shut down.
pub fn main(mut node: r2r::Node) -> anyhow::Result<()> {
    let config = hil_node_config(&node_params(&node)).context("hil_node parameters")?;
    let robot = Robot::new(config.sil.robot.clone())?;
    let initial =
        load_trajectory(trajectory_file(&config.settings.trajectory_file), &robot).context("trajectory_file")?;

    // robot_state_publisher publishes the URDF and /tf beside the node.
    let (frame_id, rate) = (&config.settings.frame_id, config.settings.publish_rate_hz);
    let hardware = format!("{:?}", config.settings.hardware).to_lowercase();
    let publisher = NodePublisher::new(&mut node, |out| {
        HilPublisher::advertise(out, robot.clone(), frame_id, rate, &hardware, None, 0)
    })?;

    let pool = LocalPool::new();
    let parameters = ParameterServer::new(node_params(&node), HIL_NODE_PARAMS);
    serve_parameters(&mut node, &pool.spawner(), parameters, nothing_at_run_time())?;
    let (requests, feeder_requests) = channel();
    let withdrawals = Arc::new(Withdrawals::default());
    // The action's goals are this package's own type, which the doc-only type-check lacks.
    #[cfg(not(feature = "ros-doc-only"))]
    let follow_goals: Arc<GoalsOfFrames> = {
        use super::trajectory_action::{deliver, serve, Goal};
        use crate::nodes::hil::goals::HilGoals;
        let goals = Arc::new(Mutex::new(HilGoals::<Goal>::new(withdrawals.clone())));
        serve(&mut node, &pool.spawner(), robot.clone(), goals.clone(), requests.clone())?;
        // Every frame counts towards the goal's result; feedback goes out at the publish rate.
        Arc::new(move |frame: Result<&Frame, &str>, publishing: bool| {
            let update = goals.lock().ok().and_then(|mut goals| match frame {
                Ok(frame) => goals.frame(frame),
                Err(reason) => goals.loop_stopped(reason),
            });
            match update {
                Some(GoalUpdate::Feedback(..)) if !publishing => {}
                Some(update) => deliver(update),
                None => {}
            }
        })
    };
    #[cfg(feature = "ros-doc-only")]
    let follow_goals: Arc<GoalsOfFrames> = Arc::new(|_: Result<&Frame, &str>, _: bool| {});

    let (frames_tx, frames) = sync_channel(1000);
    let status = Arc::new(Mutex::new(LoopStatus::default()));
    let (faults, rig_faults) = channel();
    let links = HilLinks { requests: feeder_requests, frames: frames_tx, status: status.clone(), withdrawals, faults };
    let node_reporter = NodeReporter { publisher: publisher.clone(), goals: follow_goals.clone() };
    let (autostart, auto_recover, recover_protective_stops) =
        (config.settings.autostart, config.settings.auto_recover, config.settings.auto_recover_protective_stop);
    let managed = ManagedHil::new(config, robot.clone(), initial, links, Arc::new(node_reporter));
    let segments_looping = managed.looping();

    let subscription = node.subscribe::<MultiDOFJointTrajectory>("~/trajectory", QosProfile::default())?;
    pool.spawner().spawn_local(subscription.for_each(move |message| {
        match segments_looping.load(Ordering::Relaxed) {
            true => {
                let _ = requests.send(FeedRequest::Append(multi_dof_points(&message)));
            }
            false => log::error!("~/trajectory segment refused: hil_node is not active"),
        }
        futures::future::ready(())
    }))?;

    let stop = Arc::new(AtomicBool::new(false));
    let publisher_stop = stop.clone();
    let publishing = std::thread::Builder::new().name("hil-publish".into()).spawn(move || {
        let figures = || status.lock().map(|status| *status).unwrap_or_default();
        publish_loop(&frames, &publisher_stop, figures, |event| {
            let published = publisher.with(|publisher, out, now| publisher.publish(out, now, Some(&event)));
            if let HilEvent::Frame(frame) = &event {
                follow_goals(Ok(frame), published.unwrap_or(false));
            }
        });
    })?;

    let finalized = stop.clone();
    let supervisor = Supervisor { faults: rig_faults, autostart, auto_recover, recover_protective_stops };
    serve_lifecycle(&mut node, &pool.spawner(), managed, supervisor, move || finalized.store(true, Ordering::Relaxed))?;
    spin(node, pool, &stop)?;
    let _ = publishing.join();
    Ok(())
}

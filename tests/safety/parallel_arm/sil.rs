//! sil_node as a state machine: its commands ([`SilCommands`]), its run loop's requests and
//! events modelled.

use std::sync::mpsc::sync_channel;

use arm_hil::nodes::follower::goals::TakesJointGoals;
use arm_hil::nodes::follower::stream_gate::STREAM_GAP_S;
use arm_hil::nodes::goals::{Answers, TakesCartesianGoals};
use arm_hil::nodes::sil::commands::{SilCommands, REQUEST_DEPTH};
use arm_hil::nodes::sil::run::{RunEnd, RunRequest, SilEvent};
use arm_hil::nodes::sil::SilNodeSettings;
use arm_hil::sim::{RunStats, SimError};
use proptest_state_machine::StateMachineTest;

use super::{
    book_answers, cancel_cartesian_goal, cancel_joint_goal, joint_goal, now_ns, one_owner, Expected, Model, SilMachine,
    Transition,
};
use crate::safety::{limits, Dice, GoalBook};

/// sil_node's commands with its run modelled, and what the invariants need to remember.
pub(crate) struct SilNode {
    model: Model,
    commands: SilCommands<u64, u64>,
    run_requests: std::sync::mpsc::Receiver<RunRequest>,
    book: GoalBook,
    cartesian: GoalBook,
    stream: Option<Vec<f64>>,
    stream_at: f64,
    running: bool,
}

impl SilNode {
    fn answers(&mut self, answers: Answers<u64, u64>) {
        book_answers(&mut self.book, &mut self.cartesian, answers);
    }

    fn joint_goal(&mut self, recipe: u8, seed: u64) {
        let (now, handle, before) = (now_ns(&self.model), self.book.handle(), self.book.running());
        let goal = joint_goal(&self.model, recipe, seed, now);
        match self.commands.accept_joint_goal(handle, &goal, now) {
            Ok(replaced) => {
                self.book.accepted(handle, &goal, replaced, now);
                // The stream going on with its command does not overtake the goal.
                if let (Some(last), true) = (&self.stream, self.model.t - self.stream_at <= STREAM_GAP_S) {
                    let overtaken =
                        self.commands.joint_command((self.model.t, Some(self.model.t)), &Model::names(), last);
                    assert!(overtaken.is_err(), "the stream overtakes a goal");
                    self.stream_at = self.model.t;
                }
            }
            Err(_) => assert_eq!(self.book.running(), before, "a refused goal leaves the one running"),
        }
    }

    /// The run loop takes its requests between frames.
    fn take_requests(&mut self) {
        while let Ok(request) = self.run_requests.try_recv() {
            let (end, next) = match request {
                // A run started afresh puts the simulated arm at rest on its start.
                RunRequest::Follow(trajectory) => {
                    self.model.x = trajectory.waypoints()[0].x;
                    (RunEnd::Replaced, Some(trajectory))
                }
                // A steered run goes on from where the arm is; with none running, the
                // simulation starts afresh on it.
                RunRequest::Steer(trajectory) => {
                    match self.running {
                        true => self.model.check_sent(&trajectory),
                        false => self.model.x = trajectory.waypoints()[0].x,
                    }
                    (RunEnd::Replaced, Some(trajectory))
                }
                RunRequest::Stop => (RunEnd::Stopped, None),
            };
            let now = now_ns(&self.model);
            if self.running {
                let answers = self.commands.event(&SilEvent::RunEnded { stats: RunStats::default(), end }, true, now);
                self.answers(answers);
            }
            self.running = next.is_some();
            if let Some(trajectory) = next {
                self.model.following.follow(trajectory.clone(), self.model.t);
                let answers = self.commands.event(&SilEvent::RunStarted(trajectory), true, now);
                self.answers(answers);
            }
        }
    }

    fn run(&mut self, frames: u16) {
        for _ in 0..frames {
            self.take_requests();
            if !self.running {
                break;
            }
            let (frame, ended) = self.model.frame();
            let now = now_ns(&self.model);
            let event = SilEvent::Frame { frame, clock_s: self.model.t, publish_rate_hz: 250.0, late_ns: 0 };
            let answers = self.commands.event(&event, true, now);
            self.answers(answers);
            if ended {
                let complete = SilEvent::RunEnded { stats: RunStats::default(), end: RunEnd::Complete };
                let answers = self.commands.event(&complete, true, now);
                self.answers(answers);
                let x = self.model.following.held_or(self.model.t);
                self.model.following.hold(x);
            }
            one_owner(&self.book, &self.cartesian, now);
        }
    }
}

impl StateMachineTest for SilMachine {
    type SystemUnderTest = SilNode;
    type Reference = SilMachine;

    fn init_test(_: &Expected) -> SilNode {
        let model = Model::new();
        let settings = SilNodeSettings { goal_limits: limits(), ..SilNodeSettings::default() };
        let (requests, run_requests) = sync_channel(REQUEST_DEPTH);
        let commands = SilCommands::<u64, u64>::new(&settings, model.robot.clone(), model.x, requests).unwrap();
        let stopped = settings.constraints.stopped_velocity_tolerance;
        SilNode {
            model,
            commands,
            run_requests,
            book: GoalBook::stopped_below(stopped),
            cartesian: GoalBook::default(),
            stream: None,
            stream_at: f64::NEG_INFINITY,
            running: true,
        }
    }

    fn apply(mut node: SilNode, _: &Expected, transition: Transition) -> SilNode {
        let now = now_ns(&node.model);
        match transition {
            Transition::JointGoal { recipe, seed } => node.joint_goal(recipe, seed),
            Transition::CancelJointGoal => cancel_joint_goal(&mut node.book, &mut node.commands),
            Transition::JointCommand { command, seed } => {
                let positions = node.model.joint_command(command, &mut Dice::new(seed), &node.stream);
                (node.stream, node.stream_at) = (Some(positions.clone()), node.model.t);
                let stamp = (seed % 2 == 0).then_some(node.model.t);
                let _ = node.commands.joint_command((node.model.t, stamp), &Model::names(), &positions);
            }
            Transition::CartesianGoal { shape, seed, .. } => {
                if let Some(trajectory) = node.model.cartesian_goal(shape, &mut Dice::new(seed)) {
                    let handle = node.cartesian.handle();
                    if let Ok(replaced) = node.commands.follow_cartesian_goal(handle, trajectory) {
                        node.cartesian.accepted(handle, &Default::default(), None, now);
                        if let Some((replaced, result)) = replaced {
                            assert!(!result.success);
                            node.cartesian.ended_once(replaced);
                        }
                    }
                }
            }
            Transition::CancelCartesianGoal => cancel_cartesian_goal(&node.cartesian, &mut node.commands),
            Transition::RunFails if node.running => {
                // The simulation fails: every goal it ran ends with the run.
                let failed = RunEnd::Failed(SimError::NonFinite { t: node.model.t });
                let answers =
                    node.commands.event(&SilEvent::RunEnded { stats: RunStats::default(), end: failed }, true, now);
                node.answers(answers);
                assert!(!node.book.any_running(), "a goal outlives the run that failed");
                node.running = false;
            }
            Transition::Arm(arm) => node.model.arm = arm,
            Transition::Run { frames } => node.run(frames),
            _ => {}
        }
        let answers = node.commands.drain();
        node.answers(answers);
        node
    }

    fn check_invariants(node: &SilNode, _: &Expected) {
        one_owner(&node.book, &node.cartesian, now_ns(&node.model));
    }

    fn teardown(mut node: SilNode, _: Expected) {
        let answers = node.commands.stopped("sil_node is ending");
        node.answers(answers);
        assert!(!node.book.any_running() && !node.cartesian.any_running(), "a goal outlives the node");
    }
}

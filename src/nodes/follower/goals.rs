//! A node's FollowJointTrajectory goals, without ROS: the goal being followed, the joints' last
//! state, and what each control step gives the device (setpoints), the goal (feedback, its end)
//! and `~/controller_state` (reference, feedback, error, output), as joint_trajectory_controller
//! gives them in its update. `G` is the node's handle of a goal (r2r's, in the nodes).

use std::collections::VecDeque;

use super::spline::Sample;
use super::{ErrorCode, Follower, Goal, JointState, Outcome, Plan, Refusal};
use crate::nodes::follower::stream_gate::StreamGate;

/// What the goal being followed hears from a step.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalEvent<G> {
    /// Where the joints are to be, where they are, and desired - actual.
    Feedback { goal: G, state: ControllerState },
    /// The goal ended: its handle, how, and its result code and text.
    Finished { goal: G, outcome: Outcome },
}

/// The controller's state at a step, as control_msgs/JointTrajectoryControllerState has it.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerState {
    pub time_ns: u64,
    pub joint_names: Vec<String>,
    /// Where the joints are to be: the trajectory's sample, or the hold.
    pub reference: Sample,
    /// Where they are.
    pub feedback: JointState,
    /// reference - feedback, positions [rad] and velocities [rad/s].
    pub error: JointState,
    /// The positions last commanded [rad].
    pub output: Vec<f64>,
}

/// Positions to command, in the device's order [rad].
#[derive(Debug, Clone, PartialEq)]
pub enum Setpoint {
    /// The goal's trajectory at this step.
    Follow(Vec<f64>),
    /// Where the joints are to stay: after a cancel or a violation.
    Hold(Vec<f64>),
}

impl Setpoint {
    pub fn positions(&self) -> &[f64] {
        match self {
            Setpoint::Follow(positions) | Setpoint::Hold(positions) => positions,
        }
    }
}

/// What one control step gives.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick<G> {
    /// What to command now.
    pub command: Option<Setpoint>,
    /// For the goal being followed: its feedback, and its end.
    pub events: Vec<GoalEvent<G>>,
    pub state: ControllerState,
}

impl<G> Tick<G> {
    /// This step stamped `ros_ns` for what the node publishes (the controller's state, the
    /// feedback), where the step was timed on another clock (a serial device's steady one).
    pub fn stamped(mut self, ros_ns: u64) -> Tick<G> {
        self.state.time_ns = ros_ns;
        for event in &mut self.events {
            if let GoalEvent::Feedback { state, .. } = event {
                state.time_ns = ros_ns;
            }
        }
        self
    }
}

/// How old the joints' last state may be for a goal to start from it [ns]: a few of a device's
/// telemetry periods (the STM32's 10 ms, the testbench's datastream at its default 50 Hz).
pub const DEFAULT_STATE_MAX_AGE_NS: u64 = 250_000_000;

/// One node's goals: at most one followed at a time.
#[derive(Debug)]
pub struct JointGoals<G> {
    follower: Follower,
    goal: Option<G>,
    /// The joints' last state, and when it came [ns].
    actual: Option<JointState>,
    actual_ns: u64,
    /// How old that state may be for a goal to start from it [ns].
    state_max_age_ns: u64,
    /// The velocities of a device that reports positions alone, and whether `actual`'s are
    /// its.
    estimate: VelocityEstimate,
    estimated: bool,
    /// The last positions commanded, and whether the hold still has to be commanded.
    output: Option<Vec<f64>>,
    hold_pending: bool,
}

impl<G: Clone> JointGoals<G> {
    pub fn new(follower: Follower) -> JointGoals<G> {
        JointGoals {
            follower,
            goal: None,
            actual: None,
            actual_ns: 0,
            state_max_age_ns: DEFAULT_STATE_MAX_AGE_NS,
            estimate: VelocityEstimate::default(),
            estimated: false,
            output: None,
            hold_pending: false,
        }
    }

    pub fn follower(&self) -> &Follower {
        &self.follower
    }

    /// The goal being followed.
    pub fn goal(&self) -> Option<&G> {
        self.goal.as_ref()
    }

    /// Takes `goal` (its handle `handle`) at `now_ns`, from the joints' last state: refused as
    /// [`Follower::validate`] refuses, when the device has not said where its joints are yet,
    /// or when the node's `check` of the plan fails (INVALID_GOAL, its reason). Only then does
    /// it replace the goal followed, which comes back with its outcome; `check`'s value too
    /// (what the node starts the goal with).
    pub fn accept<T>(
        &mut self,
        handle: G,
        goal: &Goal,
        now_ns: u64,
        check: impl FnOnce(&Plan) -> Result<T, String>,
    ) -> Result<(T, Option<(G, Outcome)>), Refusal> {
        let start = self.start(goal, now_ns)?;
        self.accept_from(handle, goal, now_ns, &start, check)
    }

    /// Where `goal`, received at `now_ns`, starts: the joints' last state, refused if it is
    /// older than the limit (a silent device: the joints may be elsewhere by now, and the first
    /// setpoint would jump); from rest where their velocities are an estimate, as
    /// joint_trajectory_controller starts a device without a velocity interface (and refused if
    /// it asks a path velocity tolerance, which an estimate lagging a span cannot keep). A
    /// velocity the device reported is kept, a NaN too (refused).
    fn start(&self, goal: &Goal, now_ns: u64) -> Result<JointState, Refusal> {
        let Some(mut start) = self.actual.clone() else {
            return Err(Refusal::new(ErrorCode::InvalidGoal, "the device has not reported its joints' state yet"));
        };
        let age_ns = now_ns.saturating_sub(self.actual_ns);
        if age_ns > self.state_max_age_ns {
            let reason = format!(
                "the device last reported its joints {:.3} s ago (at most {:.3} s for a goal to start from)",
                age_ns as f64 * 1e-9,
                self.state_max_age_ns as f64 * 1e-9
            );
            return Err(Refusal::new(ErrorCode::InvalidGoal, reason));
        }
        if self.estimated {
            // Names of no joint of the device are the follower's to refuse (INVALID_JOINTS).
            let joints = &self.follower.joints().names;
            let asked = goal
                .path_tolerance
                .iter()
                .find(|(joint, tolerance)| tolerance.velocity > 0.0 && joints.contains(joint));
            if let Some((joint, _)) = asked {
                let reason =
                    format!("a path velocity tolerance ({joint}) cannot be checked: this device reports no velocities");
                return Err(Refusal::new(ErrorCode::InvalidGoal, reason));
            }
            start.velocities.fill(0.0);
        }
        Ok(start)
    }

    /// [`JointGoals::accept`] with the first segment from `start` rather than from the joints'
    /// last state: where a controller's reference is, for a device whose controller tracks one
    /// (the parallel arm), so that a goal never steps it.
    pub fn accept_from<T>(
        &mut self,
        handle: G,
        goal: &Goal,
        now_ns: u64,
        start: &JointState,
        check: impl FnOnce(&Plan) -> Result<T, String>,
    ) -> Result<(T, Option<(G, Outcome)>), Refusal> {
        let plan = self.follower.validate(goal, now_ns, start)?;
        let started = check(&plan).map_err(|reason| Refusal::new(ErrorCode::InvalidGoal, reason))?;
        let replaced = self.follower.start(plan);
        let previous = self.goal.replace(handle);
        self.hold_pending = false;
        Ok((started, previous.zip(replaced)))
    }

    /// Follows `goal`, received at `now_ns`, with no client to answer: a trajectory on the
    /// node's `~/joint_trajectory` topic, taken as a trajectory controller takes one. Checked
    /// as [`JointGoals::accept`] checks a goal, it replaces the goal followed, which comes back
    /// cancelled; an empty trajectory stops what is followed, the joints holding where they are.
    pub fn follow(&mut self, goal: &Goal, now_ns: u64) -> Result<Option<(G, Outcome)>, Refusal> {
        let replaced = if goal.points.is_empty() {
            // A stop: however old the joints' state, they hold where it says.
            let Some(actual) = &self.actual else { return Ok(None) };
            let stopped = self.follower.cancel(actual);
            self.hold_pending |= stopped.is_some();
            stopped.map(|_| "stopped by an empty ~/joint_trajectory")
        } else {
            let plan = self.follower.validate(goal, now_ns, &self.start(goal, now_ns)?)?;
            self.hold_pending = false;
            self.follower.start(plan).map(|_| "replaced by ~/joint_trajectory")
        };
        let replaced = replaced.map(|reason| Outcome::Canceled { reason: reason.into() });
        Ok(self.goal.take().zip(replaced))
    }

    /// Cancels the goal followed if `is_it` says it is the one: the joints hold where they are
    /// (commanded at the next step).
    pub fn cancel(&mut self, is_it: impl Fn(&G) -> bool) -> Option<(G, Outcome)> {
        if !self.goal.as_ref().is_some_and(is_it) {
            return None;
        }
        let actual = self.actual.as_ref()?;
        let outcome = self.follower.cancel(actual)?;
        self.hold_pending = true;
        self.goal.take().map(|goal| (goal, outcome))
    }

    /// Ends the goal followed, if any, as `outcome`, commanding nothing more: the node stopped
    /// commanding (deactivated, a fault, a protective stop: the device holds by itself), or
    /// another command took the joints over. A hold still to be commanded is dropped too.
    pub fn end(&mut self, outcome: Outcome) -> Option<(G, Outcome)> {
        self.hold_pending = false;
        let outcome = self.follower.end(outcome)?;
        self.goal.take().map(|goal| (goal, outcome))
    }

    /// Whether a goal (or a trajectory with no client) is followed or its hold is still to be
    /// commanded: the node's joints are this follower's to command.
    pub fn commanding(&self) -> bool {
        self.goal.is_some() || self.follower.is_running() || self.hold_pending
    }

    /// A control step at `now_ns` with the joints at `actual`: the goal's setpoint (or the hold,
    /// once, after a cancel or a violation), its feedback and end, and the controller's state.
    /// Velocities the device does not report are estimated ([`VelocityEstimate`]).
    pub fn tick(&mut self, now_ns: u64, mut actual: JointState) -> Tick<G> {
        self.estimated = self.estimate.fill(now_ns, &mut actual);
        let mut events = Vec::new();
        let mut command = None;
        let (reference, error) = match self.follower.update(now_ns, &actual) {
            Some(step) => {
                command = Some(Setpoint::Follow(step.desired.positions.clone()));
                let error = difference(&step.desired, &actual);
                match step.ended {
                    Some(outcome) => {
                        // A goal that did not succeed holds where the joints are.
                        if outcome != Outcome::Succeeded {
                            command = self.follower.holding().map(|hold| Setpoint::Hold(hold.to_vec()));
                        }
                        match self.goal.take() {
                            Some(goal) => events.push(GoalEvent::Finished { goal, outcome }),
                            // A trajectory with no client: its end is told in the node's log.
                            None if outcome == Outcome::Succeeded => log::info!("trajectory done"),
                            None => log::warn!("trajectory ended short of its end: {outcome:?}"),
                        }
                    }
                    None => {
                        if let Some(goal) = &self.goal {
                            let output = command.as_ref().map(|command| command.positions().to_vec());
                            let state = self.state(now_ns, &step.desired, &actual, &error, &output);
                            events.push(GoalEvent::Feedback { goal: goal.clone(), state });
                        }
                    }
                }
                (step.desired, error)
            }
            None => {
                let hold = self.follower.holding().map(<[f64]>::to_vec).unwrap_or_else(|| actual.positions.clone());
                if std::mem::take(&mut self.hold_pending) {
                    command = Some(Setpoint::Hold(hold.clone()));
                }
                let reference =
                    Sample { velocities: vec![0.0; hold.len()], accelerations: vec![0.0; hold.len()], positions: hold };
                let error = difference(&reference, &actual);
                (reference, error)
            }
        };
        if let Some(command) = &command {
            self.output = Some(command.positions().to_vec());
        }
        let state = self.state(now_ns, &reference, &actual, &error, &self.output);
        (self.actual, self.actual_ns) = (Some(actual), now_ns);
        Tick { command, events, state }
    }

    /// The followed trajectory's setpoint at `now_ns`, between control steps: what a node whose
    /// steps wait for its device (a serial one's telemetry) sends as it accepts a goal, so that
    /// the goal's first setpoint goes out at once rather than at the next step. The plan starts
    /// from the joints' state at receipt, so this is where they were then, give or take the
    /// goal's first milliseconds. None when nothing is followed.
    pub fn setpoint_now(&mut self, now_ns: u64) -> Option<Setpoint> {
        let positions = self.follower.plan()?.sample_at(now_ns).positions;
        self.output = Some(positions.clone());
        Some(Setpoint::Follow(positions))
    }

    /// Records where the joints are at `now_ns`, for the next goal's start, without a control
    /// step.
    pub fn observe(&mut self, now_ns: u64, mut actual: JointState) {
        self.estimated = self.estimate.fill(now_ns, &mut actual);
        (self.actual, self.actual_ns) = (Some(actual), now_ns);
    }

    /// The device stopped or went away: what its positions said of its velocities is forgotten.
    pub fn forget_velocities(&mut self) {
        self.estimate = VelocityEstimate::default();
        if let (true, Some(actual)) = (self.estimated, &mut self.actual) {
            actual.velocities.fill(f64::NAN);
        }
    }

    fn state(
        &self,
        time_ns: u64,
        reference: &Sample,
        actual: &JointState,
        error: &JointState,
        output: &Option<Vec<f64>>,
    ) -> ControllerState {
        ControllerState {
            time_ns,
            joint_names: self.follower.joints().names.clone(),
            reference: reference.clone(),
            feedback: actual.clone(),
            error: error.clone(),
            output: output.clone().unwrap_or_default(),
        }
    }
}

/// desired - actual, positions and velocities.
fn difference(desired: &Sample, actual: &JointState) -> JointState {
    let minus = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(a, b)| a - b).collect();
    JointState {
        positions: minus(&desired.positions, &actual.positions),
        velocities: minus(&desired.velocities, &actual.velocities),
    }
}

/// What `~/follow_joint_trajectory`'s server asks of a motion node: goals and cancels in, each
/// answered at once (refused, or accepted with the goal it replaced); the node's control steps
/// answer the rest ([`Tick`]).
pub trait TakesJointGoals<G> {
    /// Takes `goal` (handle `handle`) received at `now_ns`: refused whole, or followed in place
    /// of the goal followed, which comes back with its outcome.
    fn accept_joint_goal(&mut self, handle: G, goal: &Goal, now_ns: u64) -> Result<Option<(G, Outcome)>, Refusal>;
    /// Cancels the goal followed if `is_it` says it is the one.
    fn cancel_joint_goal(&mut self, is_it: &dyn Fn(&G) -> bool) -> Option<(G, Outcome)>;
}

/// The commands of a device that takes setpoints (stm32_driver, arduino_driver): its
/// FollowJointTrajectory goals, the trajectories of its `~/joint_trajectory` topic, and its
/// `~/joint_command` stream. A goal or trajectory that takes over closes the stream; a command
/// that goes out ends the goal or trajectory followed; a stop ends it and closes the stream.
pub struct DeviceGoals<G> {
    pub goals: JointGoals<G>,
    stream: StreamGate,
}

impl<G: Clone> DeviceGoals<G> {
    pub fn new(follower: Follower) -> DeviceGoals<G> {
        DeviceGoals { goals: JointGoals::new(follower), stream: StreamGate::default() }
    }

    /// Commands that come from ros2_control's topic-based hardware (the node's `ros2_control`
    /// parameter): its initial values are not followed ([`StreamGate::of_ros2_control`]).
    pub fn from_ros2_control(mut self, yes: bool) -> DeviceGoals<G> {
        if yes {
            self.stream = StreamGate::of_ros2_control();
        }
        self
    }

    /// These goals, starting only from a state at most `max_age_ns` old: a device that speaks
    /// less often than [`DEFAULT_STATE_MAX_AGE_NS`] allows.
    pub fn with_state_max_age_ns(mut self, max_age_ns: u64) -> DeviceGoals<G> {
        self.goals.state_max_age_ns = max_age_ns;
        self
    }

    /// A `~/joint_command` of `positions` that came at `now_s` [s] while the node takes
    /// commands (`taking`) or not: whether it is to go out ([`StreamGate::offer`]).
    pub fn offer_command(&mut self, positions: &[f64], now_s: f64, taking: bool) -> Result<(), String> {
        self.stream.offer(positions, now_s, taking)
    }

    /// A `~/joint_command` went out: it has the joints, and the goal or trajectory followed ends.
    pub fn command_sent(&mut self) -> Option<(G, Outcome)> {
        self.goals.end(Outcome::Canceled { reason: "replaced by ~/joint_command".into() })
    }

    /// A `~/joint_trajectory` that came at `now_ns` while the node takes commands (`taking`):
    /// followed as [`JointGoals::follow`] says, in place of the goal followed (which comes back)
    /// and of the stream.
    pub fn follow_trajectory(
        &mut self,
        goal: &Goal,
        now_ns: u64,
        taking: bool,
    ) -> Result<Option<(G, Outcome)>, Refusal> {
        if !taking {
            return Err(Refusal::new(ErrorCode::InvalidGoal, "the node is not active"));
        }
        let replaced = self.goals.follow(goal, now_ns)?;
        self.stream.close();
        Ok(replaced)
    }

    /// The node stops commanding (`why`): the goal or trajectory followed ends (a goal
    /// aborted), and the stream's command in force is not followed again.
    pub fn stopped(&mut self, why: &str) -> Option<(G, Outcome)> {
        self.stream.close();
        self.goals.forget_velocities();
        let reason = format!("{why}: the joints hold where they are");
        self.goals.end(Outcome::Aborted { code: ErrorCode::InvalidGoal, reason })
    }
}

impl<G: Clone> TakesJointGoals<G> for DeviceGoals<G> {
    fn accept_joint_goal(&mut self, handle: G, goal: &Goal, now_ns: u64) -> Result<Option<(G, Outcome)>, Refusal> {
        let ((), replaced) = self.goals.accept(handle, goal, now_ns, |_| Ok(()))?;
        self.stream.close();
        Ok(replaced)
    }

    fn cancel_joint_goal(&mut self, is_it: &dyn Fn(&G) -> bool) -> Option<(G, Outcome)> {
        self.goals.cancel(is_it)
    }
}

/// The velocities of a device that reports positions alone (no velocities: the STM32's short
/// telemetry, the testbench's older table): each state's positions against those of the newest
/// state at least [`VelocityEstimate::SPAN_NS`] before it, a window that slides with every
/// state. Unknown (not a number: never stopped, outside every velocity tolerance) until a first
/// span has passed, and again after a gap of more than [`VelocityEstimate::MAX_SPAN_NS`] (a
/// link drop, a replug), a clock that went back, or a stop. A device that reports velocities
/// keeps its own, a NaN among them too.
#[derive(Debug, Clone, Default)]
pub struct VelocityEstimate {
    /// The states of the last span and the one before it: when [ns], the positions [rad].
    window: VecDeque<(u64, Vec<f64>)>,
}

impl VelocityEstimate {
    /// The shortest span [ns]: states that come in a burst (a host that was busy, a USB-serial
    /// adapter's latency) are not differenced, and a servo dithering by one count of a 12-bit
    /// encoder (1.5 mrad) reads under the stopped tolerance's 0.01 rad/s.
    pub const SPAN_NS: u64 = 200_000_000;
    /// The longest gap [ns]: positions further apart (a link that dropped) tell no velocity
    /// worth trusting; the testbench's slowest datastream (1 Hz) still tells them.
    pub const MAX_SPAN_NS: u64 = 2_500_000_000;

    /// `actual`'s velocities at `now_ns`, where the device gave none; whether it gave none.
    pub fn fill(&mut self, now_ns: u64, actual: &mut JointState) -> bool {
        if !actual.velocities.is_empty() {
            return false;
        }
        let joints = actual.positions.len();
        let continues = self.window.back().is_some_and(|(then_ns, positions)| {
            *then_ns <= now_ns && now_ns - then_ns <= Self::MAX_SPAN_NS && positions.len() == joints
        });
        if !continues {
            self.window.clear();
        }
        // A state at the same time as the last takes its place.
        if self.window.back().is_some_and(|(then_ns, _)| *then_ns == now_ns) {
            self.window.pop_back();
        }
        // The newest state at least a span old is the base; those before it are no longer needed.
        while self.window.get(1).is_some_and(|(then_ns, _)| now_ns - then_ns >= Self::SPAN_NS) {
            self.window.pop_front();
        }
        actual.velocities = match self.window.front() {
            Some((then_ns, then)) if now_ns - then_ns >= Self::SPAN_NS => {
                let span_s = (now_ns - then_ns) as f64 * 1e-9;
                actual.positions.iter().zip(then).map(|(now, then)| (now - then) / span_s).collect()
            }
            _ => vec![f64::NAN; joints],
        };
        self.window.push_back((now_ns, actual.positions.clone()));
        true
    }
}

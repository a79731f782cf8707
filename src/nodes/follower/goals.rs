//! A node's FollowJointTrajectory goals, without ROS: the goal being followed, the joints' last
//! state, and what each control step gives the device (setpoints), the goal (feedback, its end)
//! and `~/controller_state` (reference, feedback, error, output), as joint_trajectory_controller
//! gives them in its update. `G` is the node's handle of a goal (r2r's, in the nodes).

use super::spline::Sample;
use super::{ErrorCode, Follower, Goal, JointState, Outcome, Refusal};

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

/// One node's goals: at most one followed at a time.
#[derive(Debug)]
pub struct JointGoals<G> {
    follower: Follower,
    goal: Option<G>,
    actual: Option<JointState>,
    /// The last positions commanded, and whether the hold still has to be commanded.
    output: Option<Vec<f64>>,
    hold_pending: bool,
}

impl<G: Clone> JointGoals<G> {
    pub fn new(follower: Follower) -> JointGoals<G> {
        JointGoals { follower, goal: None, actual: None, output: None, hold_pending: false }
    }

    pub fn follower(&self) -> &Follower {
        &self.follower
    }

    /// The goal being followed.
    pub fn goal(&self) -> Option<&G> {
        self.goal.as_ref()
    }

    /// Takes `goal` (its handle `handle`) at `now_ns`, from the joints' last state: refused as
    /// [`Follower::accept`] refuses, or when the device has not said where its joints are yet.
    /// The goal it replaces comes back with its outcome.
    pub fn accept(
        &mut self,
        handle: G,
        goal: &Goal,
        now_ns: u64,
        reachable: impl Fn(&[f64]) -> Result<(), String>,
    ) -> Result<Option<(G, Outcome)>, Refusal> {
        let Some(actual) = &self.actual else {
            return Err(Refusal {
                code: ErrorCode::InvalidGoal,
                reason: "the device has not reported its joints' state yet".into(),
            });
        };
        let replaced = self.follower.accept(goal, now_ns, actual, reachable)?;
        let previous = self.goal.replace(handle);
        self.hold_pending = false;
        Ok(previous.zip(replaced))
    }

    /// Cancels the goal followed if `is_it` says it is the one: the joints hold where they are
    /// (commanded at the next step).
    pub fn cancel(&mut self, is_it: impl Fn(&G) -> bool) -> Option<(G, Outcome)> {
        if !self.goal.as_ref().is_some_and(is_it) {
            return None;
        }
        self.stop()
    }

    /// Ends the goal followed, if any, as cancelled: the node stops commanding (deactivated).
    pub fn stop(&mut self) -> Option<(G, Outcome)> {
        let actual = self.actual.as_ref()?;
        let outcome = self.follower.cancel(actual)?;
        self.hold_pending = true;
        self.goal.take().map(|goal| (goal, outcome))
    }

    /// A control step at `now_ns` with the joints at `actual`: the goal's setpoint (or the hold,
    /// once, after a cancel or a violation), its feedback and end, and the controller's state.
    pub fn tick(&mut self, now_ns: u64, actual: JointState) -> Tick<G> {
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
                        if let Some(goal) = self.goal.take() {
                            events.push(GoalEvent::Finished { goal, outcome });
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
        self.actual = Some(actual);
        Tick { command, events, state }
    }

    /// Records where the joints are, for the next goal's start, without a control step.
    pub fn observe(&mut self, actual: JointState) {
        self.actual = Some(actual);
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

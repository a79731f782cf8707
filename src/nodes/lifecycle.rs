//! The managed-node lifecycle (ROS 2's state machine for hardware nodes, lifecycle_msgs), without
//! ROS: the primary states, the transitions a user requests (`ros2 lifecycle set NODE
//! configure`), the node's callbacks, and what each outcome leads to.
//!
//! A callback's success ends in the transition's goal state; its failure returns to the state
//! it started from; an error (or a failure of shutdown) goes through error processing, whose
//! success leaves the node unconfigured, never ended. States and transitions carry the ids and
//! labels of lifecycle_msgs/State and lifecycle_msgs/Transition, which `ros2 lifecycle` shows.

use std::fmt;
use std::time::{Duration, Instant};

/// A state of the machine: the four primary states and the transition states between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Unconfigured,
    Inactive,
    Active,
    Finalized,
    Configuring,
    CleaningUp,
    ShuttingDown,
    Activating,
    Deactivating,
    ErrorProcessing,
}

impl State {
    pub const PRIMARY: [State; 4] = [State::Unconfigured, State::Inactive, State::Active, State::Finalized];
    pub const ALL: [State; 10] = [
        State::Unconfigured,
        State::Inactive,
        State::Active,
        State::Finalized,
        State::Configuring,
        State::CleaningUp,
        State::ShuttingDown,
        State::Activating,
        State::Deactivating,
        State::ErrorProcessing,
    ];

    /// lifecycle_msgs/State's id.
    pub fn id(self) -> u8 {
        match self {
            State::Unconfigured => 1,
            State::Inactive => 2,
            State::Active => 3,
            State::Finalized => 4,
            State::Configuring => 10,
            State::CleaningUp => 11,
            State::ShuttingDown => 12,
            State::Activating => 13,
            State::Deactivating => 14,
            State::ErrorProcessing => 15,
        }
    }

    /// lifecycle_msgs/State's label, as rcl_lifecycle names it.
    pub fn label(self) -> &'static str {
        match self {
            State::Unconfigured => "unconfigured",
            State::Inactive => "inactive",
            State::Active => "active",
            State::Finalized => "finalized",
            State::Configuring => "configuring",
            State::CleaningUp => "cleaningup",
            State::ShuttingDown => "shuttingdown",
            State::Activating => "activating",
            State::Deactivating => "deactivating",
            State::ErrorProcessing => "errorprocessing",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// What a node's callback does for a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Configure,
    Cleanup,
    Activate,
    Deactivate,
    Shutdown,
    /// Error processing, after a callback's error.
    Recover,
}

/// How a callback ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Not done, nothing broken: back to where the transition started.
    Failure(String),
    /// Something broke: error processing follows.
    Error(String),
}

/// One edge of the machine: a lifecycle_msgs/TransitionDescription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    /// lifecycle_msgs/Transition's id.
    pub id: u8,
    pub label: &'static str,
    pub start: State,
    pub goal: State,
}

const fn edge(id: u8, label: &'static str, start: State, goal: State) -> Edge {
    Edge { id, label, start, goal }
}

/// The transitions a user requests, from a primary state into a transition state.
pub const REQUESTS: [Edge; 7] = [
    edge(1, "configure", State::Unconfigured, State::Configuring),
    edge(2, "cleanup", State::Inactive, State::CleaningUp),
    edge(3, "activate", State::Inactive, State::Activating),
    edge(4, "deactivate", State::Active, State::Deactivating),
    edge(5, "shutdown", State::Unconfigured, State::ShuttingDown),
    edge(6, "shutdown", State::Inactive, State::ShuttingDown),
    edge(7, "shutdown", State::Active, State::ShuttingDown),
];

/// Where each callback's outcome leads, from a transition state.
pub const OUTCOMES: [Edge; 18] = [
    edge(10, "transition_success", State::Configuring, State::Inactive),
    edge(11, "transition_failure", State::Configuring, State::Unconfigured),
    edge(12, "transition_error", State::Configuring, State::ErrorProcessing),
    edge(20, "transition_success", State::CleaningUp, State::Unconfigured),
    edge(21, "transition_failure", State::CleaningUp, State::Inactive),
    edge(22, "transition_error", State::CleaningUp, State::ErrorProcessing),
    edge(30, "transition_success", State::Activating, State::Active),
    edge(31, "transition_failure", State::Activating, State::Inactive),
    edge(32, "transition_error", State::Activating, State::ErrorProcessing),
    edge(40, "transition_success", State::Deactivating, State::Inactive),
    edge(41, "transition_failure", State::Deactivating, State::Active),
    edge(42, "transition_error", State::Deactivating, State::ErrorProcessing),
    edge(50, "transition_success", State::ShuttingDown, State::Finalized),
    edge(51, "transition_failure", State::ShuttingDown, State::Finalized),
    edge(52, "transition_error", State::ShuttingDown, State::ErrorProcessing),
    edge(60, "transition_success", State::ErrorProcessing, State::Unconfigured),
    edge(61, "transition_failure", State::ErrorProcessing, State::Finalized),
    edge(62, "transition_error", State::ErrorProcessing, State::Finalized),
];

/// A node the machine drives: one callback per step, run while the machine is in the step's
/// transition state.
pub trait Managed {
    fn on(&mut self, step: Step) -> Outcome;

    /// What the node does between transitions, every tenth of a second (its status, say).
    fn tick(&mut self) {}
}

/// Why a requested transition was not started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("no transition {label:?} (id {id}) from {state}")]
    NotAvailable { id: u8, label: String, state: State },
}

/// What a transition did: every edge it took, in order (each is a lifecycle_msgs/TransitionEvent),
/// and why it did not end where it was asked to, if it did not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub edges: Vec<Edge>,
    pub reason: Option<String>,
}

impl Taken {
    /// Whether the transition reached its goal (lifecycle_msgs/ChangeState's `success`).
    pub fn success(&self) -> bool {
        self.reason.is_none()
    }
}

/// What a managed node's own threads report that takes it out of active.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The device failed: the node releases it through error processing, to unconfigured.
    Device(String),
    /// The loop made a protective stop: the motors hold, the device stays open, and the node
    /// goes to inactive, the reason on its status, until a person activates it again.
    ProtectiveStop(String),
}

/// The machine, in one of its primary states between transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifecycle {
    state: State,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle { state: State::Unconfigured }
    }
}

impl Lifecycle {
    pub fn state(&self) -> State {
        self.state
    }

    /// The transitions a user may request now.
    pub fn available(&self) -> Vec<Edge> {
        REQUESTS.iter().filter(|edge| edge.start == self.state).copied().collect()
    }

    /// Every edge of the machine (lifecycle_msgs/GetTransitionGraph).
    pub fn graph() -> Vec<Edge> {
        REQUESTS.iter().chain(&OUTCOMES).copied().collect()
    }

    /// Runs the transition with id `id`, or (with id 0) labelled `label`, through `node`'s
    /// callbacks to the primary state they lead to.
    pub fn change(&mut self, id: u8, label: &str, node: &mut impl Managed) -> Result<Taken, Refused> {
        let request = self
            .available()
            .into_iter()
            .find(|edge| if id == 0 { edge.label == label } else { edge.id == id })
            .ok_or_else(|| Refused::NotAvailable { id, label: label.to_owned(), state: self.state })?;
        let step = match request.id {
            1 => Step::Configure,
            2 => Step::Cleanup,
            3 => Step::Activate,
            4 => Step::Deactivate,
            _ => Step::Shutdown,
        };
        let outcome = node.on(step);
        Ok(self.follow(request, step, outcome, node))
    }

    /// The device failed while the node was configured (`reason`): the node leaves its state as
    /// if the way down had failed, deactivating from active or cleaning up from inactive with
    /// an error, so that error processing releases the device and leaves the node unconfigured.
    /// Nothing to do in the other states.
    pub fn fault(&mut self, reason: &str, node: &mut impl Managed) -> Option<Taken> {
        let (id, step) = match self.state {
            State::Active => (4, Step::Deactivate),
            State::Inactive => (2, Step::Cleanup),
            _ => return None,
        };
        let request = REQUESTS.iter().find(|edge| edge.id == id).copied()?;
        Some(self.follow(request, step, Outcome::Error(reason.to_owned()), node))
    }

    /// A protective stop (`reason`) while active: the node deactivates (its callback finds the
    /// loop already stopped) and waits inactive, its device open. The edges taken carry the
    /// reason. Nothing to do in the other states.
    pub fn halt(&mut self, reason: &str, node: &mut impl Managed) -> Option<Taken> {
        if self.state != State::Active {
            return None;
        }
        let request = REQUESTS.iter().find(|edge| edge.id == 4).copied()?;
        let outcome = node.on(Step::Deactivate);
        let mut taken = self.follow(request, Step::Deactivate, outcome, node);
        taken.reason.get_or_insert_with(|| format!("protective stop: {reason}"));
        Some(taken)
    }

    /// Takes `request`, whose callback ended with `outcome`, and what follows from it.
    fn follow(&mut self, request: Edge, step: Step, mut outcome: Outcome, node: &mut impl Managed) -> Taken {
        let mut taken = Taken { edges: vec![request], reason: None };
        let mut state = request.goal;
        loop {
            let kind = match &outcome {
                Outcome::Success => "transition_success",
                Outcome::Failure(_) => "transition_failure",
                Outcome::Error(_) => "transition_error",
            };
            if let Outcome::Failure(reason) | Outcome::Error(reason) = &outcome {
                taken.reason.get_or_insert_with(|| reason.clone());
            }
            let Some(next) = OUTCOMES.iter().find(|edge| edge.start == state && edge.label == kind) else {
                break;
            };
            taken.edges.push(*next);
            state = next.goal;
            if state != State::ErrorProcessing {
                break;
            }
            outcome = node.on(Step::Recover);
        }
        if state == State::Finalized && step != Step::Shutdown && taken.reason.is_none() {
            taken.reason = Some("error processing failed".to_owned());
        }
        self.state = state;
        taken
    }
}

/// How often `auto_recover` tries to bring a node back.
pub const RECOVERY_PERIOD: Duration = Duration::from_secs(1);

/// A managed node kept up: its device faults take it down (see [`Lifecycle::fault`]), and with
/// `auto_recover` it is configured and activated again, once a second, while it should be
/// active and is not. It should be active after an activate (a user's, or [`Supervised::bring_up`]
/// at start) until a user deactivates, cleans up or shuts it down, or a protective stop takes it
/// to inactive (unless it recovers from those too).
#[derive(Debug)]
pub struct Supervised<M> {
    lifecycle: Lifecycle,
    managed: M,
    auto_recover: bool,
    recover_protective_stops: bool,
    wants_active: bool,
    last_try: Option<Instant>,
}

impl<M: Managed> Supervised<M> {
    pub fn new(managed: M, auto_recover: bool) -> Supervised<M> {
        Supervised {
            lifecycle: Lifecycle::default(),
            managed,
            auto_recover,
            recover_protective_stops: false,
            wants_active: false,
            last_try: None,
        }
    }

    /// With `auto_recover`, activates again after a protective stop too.
    pub fn recovering_protective_stops(mut self, recover: bool) -> Supervised<M> {
        self.recover_protective_stops = recover;
        self
    }

    pub fn lifecycle(&self) -> &Lifecycle {
        &self.lifecycle
    }

    /// A user's transition (see [`Lifecycle::change`]).
    pub fn request(&mut self, id: u8, label: &str) -> Result<Taken, Refused> {
        let taken = self.lifecycle.change(id, label, &mut self.managed)?;
        if taken.success() {
            let label = taken.edges[0].label;
            self.wants_active = label == "activate" || (self.wants_active && label == "configure");
        }
        Ok(taken)
    }

    /// A fault its threads reported: a device fault (see [`Lifecycle::fault`]) or a protective
    /// stop (see [`Lifecycle::halt`]).
    pub fn fault(&mut self, fault: &Fault) -> Option<Taken> {
        match fault {
            Fault::Device(reason) => self.lifecycle.fault(reason, &mut self.managed),
            Fault::ProtectiveStop(reason) => {
                self.wants_active &= self.recover_protective_stops;
                self.lifecycle.halt(reason, &mut self.managed)
            }
        }
    }

    /// Configures (where needed) and activates; the transitions taken, up to the first that failed.
    pub fn bring_up(&mut self) -> Vec<Taken> {
        let mut taken = Vec::new();
        for (from, label) in [(State::Unconfigured, "configure"), (State::Inactive, "activate")] {
            if self.lifecycle.state() != from {
                continue;
            }
            match self.lifecycle.change(0, label, &mut self.managed) {
                Ok(step) => {
                    let failed = !step.success();
                    taken.push(step);
                    if failed {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
        self.wants_active = true;
        taken
    }

    /// The process is ending: the node is shut down from the primary state it is in, as
    /// `ros2 lifecycle set NODE shutdown` would (its goals end, its device stops), and stays down.
    /// Nothing to do once it is finalized.
    pub fn shut_down(&mut self) -> Option<Taken> {
        self.wants_active = false;
        self.lifecycle.change(0, "shutdown", &mut self.managed).ok()
    }

    /// Between transitions, at `now`: the node's own tick, then a recovery if one is due.
    pub fn tick(&mut self, now: Instant) -> Vec<Taken> {
        self.managed.tick();
        let down = !matches!(self.lifecycle.state(), State::Active | State::Finalized);
        let due = self.last_try.is_none_or(|last| now.saturating_duration_since(last) >= RECOVERY_PERIOD);
        if !(self.auto_recover && self.wants_active && down && due) {
            return Vec::new();
        }
        self.last_try = Some(now);
        self.bring_up()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node whose callbacks answer from a script, recording what was called.
    #[derive(Default)]
    struct Scripted {
        answers: Vec<(Step, Outcome)>,
        called: Vec<Step>,
    }

    impl Managed for Scripted {
        fn on(&mut self, step: Step) -> Outcome {
            self.called.push(step);
            match self.answers.iter().position(|(s, _)| *s == step) {
                Some(index) => self.answers.remove(index).1,
                None => Outcome::Success,
            }
        }
    }

    fn ids(taken: &Taken) -> Vec<u8> {
        taken.edges.iter().map(|edge| edge.id).collect()
    }

    #[test]
    fn configure_activate_deactivate_cleanup_shutdown_walk_the_primary_states() {
        let (mut machine, mut node) = (Lifecycle::default(), Scripted::default());
        for (label, state, edges) in [
            ("configure", State::Inactive, vec![1, 10]),
            ("activate", State::Active, vec![3, 30]),
            ("deactivate", State::Inactive, vec![4, 40]),
            ("cleanup", State::Unconfigured, vec![2, 20]),
            ("shutdown", State::Finalized, vec![5, 50]),
        ] {
            let taken = machine.change(0, label, &mut node).unwrap();
            assert!(taken.success(), "{label}: {taken:?}");
            assert_eq!((machine.state(), ids(&taken)), (state, edges), "{label}");
        }
        assert!(machine.available().is_empty());
    }

    #[test]
    fn a_failed_callback_returns_to_where_the_transition_started() {
        let mut machine = Lifecycle::default();
        let mut node =
            Scripted { answers: vec![(Step::Configure, Outcome::Failure("no device".into()))], ..Default::default() };
        let taken = machine.change(1, "", &mut node).unwrap();
        assert_eq!((machine.state(), ids(&taken)), (State::Unconfigured, vec![1, 11]));
        assert_eq!(taken.reason.as_deref(), Some("no device"));
    }

    #[test]
    fn an_error_goes_through_error_processing_to_unconfigured() {
        let mut machine = Lifecycle::default();
        let mut node = Scripted::default();
        machine.change(0, "configure", &mut node).unwrap();
        node.answers.push((Step::Activate, Outcome::Error("sensor silent".into())));
        let taken = machine.change(0, "activate", &mut node).unwrap();
        assert_eq!((machine.state(), ids(&taken)), (State::Unconfigured, vec![3, 32, 60]));
        assert!(!taken.success());
        assert_eq!(node.called, [Step::Configure, Step::Activate, Step::Recover]);
    }

    #[test]
    fn failed_error_processing_finalizes_the_node() {
        let mut machine = Lifecycle::default();
        let mut node = Scripted {
            answers: vec![(Step::Configure, Outcome::Error("a".into())), (Step::Recover, Outcome::Failure("b".into()))],
            ..Default::default()
        };
        let taken = machine.change(0, "configure", &mut node).unwrap();
        assert_eq!((machine.state(), ids(&taken)), (State::Finalized, vec![1, 12, 61]));
    }

    #[test]
    fn transitions_not_available_from_the_state_are_refused_and_change_nothing() {
        let mut machine = Lifecycle::default();
        let error = machine.change(0, "activate", &mut Scripted::default()).unwrap_err();
        assert!(error.to_string().contains("from unconfigured"), "{error}");
        assert!(machine.change(7, "", &mut Scripted::default()).is_err());
        assert_eq!(machine.state(), State::Unconfigured);
        assert_eq!(machine.available().iter().map(|edge| edge.id).collect::<Vec<_>>(), [1, 5]);
    }

    #[test]
    fn a_device_fault_leaves_the_node_unconfigured_through_error_processing() {
        let (mut machine, mut node) = (Lifecycle::default(), Scripted::default());
        assert_eq!(machine.fault("sensor silent", &mut node), None, "nothing to leave while unconfigured");
        machine.change(0, "configure", &mut node).unwrap();
        machine.change(0, "activate", &mut node).unwrap();
        let taken = machine.fault("sensor silent", &mut node).unwrap();
        assert_eq!((machine.state(), ids(&taken)), (State::Unconfigured, vec![4, 42, 60]));
        assert_eq!(taken.reason.as_deref(), Some("sensor silent"));
        assert_eq!(node.called.last(), Some(&Step::Recover), "error processing releases the device");
        machine.change(0, "configure", &mut node).unwrap();
        let taken = machine.fault("port vanished", &mut node).unwrap();
        assert_eq!((machine.state(), ids(&taken)), (State::Unconfigured, vec![2, 22, 60]));
    }

    /// A device that fails its configures while `down` says so.
    struct Device {
        down: std::rc::Rc<std::cell::Cell<bool>>,
    }

    impl Managed for Device {
        fn on(&mut self, step: Step) -> Outcome {
            match (step, self.down.get()) {
                (Step::Configure, true) => Outcome::Failure("no answer".into()),
                _ => Outcome::Success,
            }
        }
    }

    #[test]
    fn auto_recover_brings_a_faulted_node_back_once_the_device_is_and_no_sooner_than_its_period() {
        let down = std::rc::Rc::new(std::cell::Cell::new(false));
        let mut node = Supervised::new(Device { down: down.clone() }, true);
        let start = Instant::now();
        assert!(node.bring_up().iter().all(Taken::success));
        assert_eq!(node.lifecycle().state(), State::Active);
        down.set(true);
        node.fault(&Fault::Device("unplugged".into())).unwrap();
        let tried = node.tick(start);
        assert_eq!((tried.len(), node.lifecycle().state()), (1, State::Unconfigured), "the device is still away");
        assert!(node.tick(start + Duration::from_millis(500)).is_empty(), "tried again within the period");
        down.set(false);
        let tried = node.tick(start + RECOVERY_PERIOD);
        assert_eq!((tried.len(), node.lifecycle().state()), (2, State::Active));
    }

    #[test]
    fn what_a_user_took_down_stays_down_and_without_auto_recover_nothing_comes_back() {
        let down = std::rc::Rc::new(std::cell::Cell::new(false));
        let mut node = Supervised::new(Device { down: down.clone() }, true);
        node.bring_up();
        node.request(0, "deactivate").unwrap();
        assert!(node.tick(Instant::now()).is_empty());
        assert_eq!(node.lifecycle().state(), State::Inactive);

        let mut manual = Supervised::new(Device { down }, false);
        manual.bring_up();
        manual.fault(&Fault::Device("unplugged".into())).unwrap();
        assert!(manual.tick(Instant::now() + RECOVERY_PERIOD).is_empty());
        assert_eq!(manual.lifecycle().state(), State::Unconfigured);
        manual.request(0, "configure").unwrap();
        manual.request(0, "activate").unwrap();
        assert_eq!(manual.lifecycle().state(), State::Active);
    }

    #[test]
    fn a_protective_stop_leaves_the_node_inactive_and_auto_recover_leaves_it_there_unless_told() {
        let start = Instant::now();
        let stop = Fault::ProtectiveStop("tracking_error".into());
        let mut node = Supervised::new(Device { down: Default::default() }, true);
        node.bring_up();
        let taken = node.fault(&stop).unwrap();
        assert_eq!((node.lifecycle().state(), taken.edges.len()), (State::Inactive, 2));
        assert_eq!(taken.reason.as_deref(), Some("protective stop: tracking_error"));
        assert!(node.tick(start + RECOVERY_PERIOD).is_empty(), "a person looks first");
        assert_eq!(node.fault(&stop), None, "nothing to stop while inactive");

        let mut recovering =
            Supervised::new(Device { down: Default::default() }, true).recovering_protective_stops(true);
        recovering.bring_up();
        recovering.fault(&stop).unwrap();
        assert_eq!(recovering.tick(start + RECOVERY_PERIOD).len(), 1);
        assert_eq!(recovering.lifecycle().state(), State::Active);
    }

    #[test]
    fn the_graph_has_every_edge_once() {
        let graph = Lifecycle::graph();
        assert_eq!(graph.len(), 25);
        let mut ids: Vec<u8> = graph.iter().map(|edge| edge.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 25);
    }
}

//! The managed-node interface as `ros2 lifecycle` expects it, for any node driven by a
//! [`Lifecycle`] (r2r has none, as it had no parameter services): ~/change_state, ~/get_state,
//! ~/get_available_states, ~/get_available_transitions, ~/get_transition_graph, and every edge
//! taken on ~/transition_event. The node's callbacks run on the spinning thread, as rclcpp runs
//! them in its executor.
//!
//! Beside them, ten times a second, the node takes the device faults its threads report, ticks,
//! and recovers as [`Supervised`] says; it is brought up at start with `autostart`.

use std::cell::RefCell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::executor::{LocalPool, LocalSpawner};
use futures::task::LocalSpawnExt;
use r2r::lifecycle_msgs::msg::{State as StateMsg, Transition, TransitionDescription, TransitionEvent};
use r2r::lifecycle_msgs::srv::{ChangeState, GetAvailableStates, GetAvailableTransitions, GetState};
use r2r::QosProfile;

use super::{now_ns, serve, spin_while};
use crate::hil::exit;
use crate::nodes::lifecycle::{Edge, Fault, Lifecycle, Managed, State, Supervised, Taken};

fn state(state: State) -> StateMsg {
    StateMsg { id: state.id(), label: state.label().to_owned() }
}

fn description(edge: &Edge) -> TransitionDescription {
    TransitionDescription {
        transition: Transition { id: edge.id, label: edge.label.to_owned() },
        start_state: state(edge.start),
        goal_state: state(edge.goal),
    }
}

/// How a managed node is kept up.
pub struct Supervisor {
    /// Device faults and protective stops, from the node's threads.
    pub faults: Receiver<Fault>,
    /// Configure and activate at start.
    pub autostart: bool,
    /// See [`Supervised`].
    pub auto_recover: bool,
    /// With `auto_recover`, activate again after a protective stop too.
    pub recover_protective_stops: bool,
}

/// A supervised node on the spinning thread, with what publishes the edges it takes.
struct Machine<M> {
    node: Supervised<M>,
    events: r2r::Publisher<TransitionEvent>,
    clock: Arc<Mutex<r2r::Clock>>,
}

impl<M: Managed> Machine<M> {
    /// Publishes and logs what `taken` did (a transition asked for `label`).
    fn took(&self, label: &str, taken: &Taken) {
        for edge in &taken.edges {
            let event = TransitionEvent {
                timestamp: now_ns(&self.clock),
                transition: Transition { id: edge.id, label: edge.label.to_owned() },
                start_state: state(edge.start),
                goal_state: state(edge.goal),
            };
            if let Err(error) = self.events.publish(&event) {
                log::warn!("publishing ~/transition_event failed: {error}");
            }
        }
        // Where this transition left the node (bring-up takes two in a row).
        let now = taken.edges.last().map_or_else(|| self.node.lifecycle().state(), |edge| edge.goal);
        match &taken.reason {
            Some(reason) => log::error!("{label} failed ({reason}): now {now}"),
            None => log::info!("{label}: now {now}"),
        }
    }
}

/// Serves the lifecycle of `managed` as `supervisor` says and spins `node` until the node is
/// finalized or the process is asked to end (see [`spin_until_shut_down`]): the rest of a managed
/// driver's life once its topics are set up.
pub fn spin_managed<M: Managed + 'static>(
    mut node: r2r::Node,
    pool: LocalPool,
    managed: M,
    supervisor: Supervisor,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let finalized = stop.clone();
    let lifecycle = serve_lifecycle(&mut node, &pool.spawner(), managed, supervisor, move || {
        finalized.store(true, Ordering::Relaxed)
    })?;
    spin_until_shut_down(node, pool, &stop, &lifecycle)
}

/// How long a node that shut down because the process is ending keeps spinning, so that its
/// transition events and its goals' results reach their clients.
const FAREWELL: Duration = Duration::from_millis(150);

/// Spins `node` until it is finalized (`stop`) or the process is asked to end ([`exit`]: a
/// signal, a panic, this thread's own among them). Then a node not finalized yet is shut down
/// through its lifecycle, as `ros2 lifecycle set NODE shutdown` would (its goals end ABORTED with
/// the reason, its device is stopped and released), and spun for [`FAREWELL`] more, refusing
/// transitions; then `stop` is set for the node's other threads.
pub fn spin_until_shut_down<M: Managed>(
    mut node: r2r::Node,
    mut pool: LocalPool,
    stop: &Arc<AtomicBool>,
    lifecycle: &ServedLifecycle<M>,
) -> anyhow::Result<()> {
    let spun = std::panic::catch_unwind(AssertUnwindSafe(|| {
        spin_while(&mut node, &mut pool, || !stop.load(Ordering::Relaxed) && !exit::requested());
    }));
    if spun.is_err() {
        // The panic hook has stopped the devices and asked the process to end: the node's goals
        // end and it shuts down as on a signal.
        log::error!("a callback of the node panicked");
    }
    if !stop.load(Ordering::Relaxed) {
        lifecycle.shut_down(if exit::panicked() { "shutdown after a panic" } else { "shutdown on a signal" });
        let farewell = Instant::now() + FAREWELL;
        spin_while(&mut node, &mut pool, || Instant::now() < farewell);
    }
    stop.store(true, Ordering::Relaxed);
    Ok(())
}

/// A node's lifecycle as [`serve_lifecycle`] serves it, for the transition the process's end
/// takes.
pub struct ServedLifecycle<M>(Rc<RefCell<Machine<M>>>);

impl<M: Managed> ServedLifecycle<M> {
    /// Shuts the node down (unless it is finalized), publishing the edges under `label`.
    fn shut_down(&self, label: &str) {
        let mut machine = self.0.borrow_mut();
        if let Some(taken) = machine.node.shut_down() {
            machine.took(label, &taken);
        }
    }
}

/// Serves the lifecycle interface of `managed` on `spawner`, publishes every edge it takes, and
/// keeps it up as `supervisor` says; calls `finalized` once the node is finalized.
pub fn serve_lifecycle<M: Managed + 'static>(
    node: &mut r2r::Node,
    spawner: &LocalSpawner,
    managed: M,
    supervisor: Supervisor,
    finalized: impl Fn() + 'static,
) -> anyhow::Result<ServedLifecycle<M>> {
    let Supervisor { faults, autostart, auto_recover, recover_protective_stops } = supervisor;
    let shared = Rc::new(RefCell::new(Machine {
        node: Supervised::new(managed, auto_recover).recovering_protective_stops(recover_protective_stops),
        events: node.create_publisher::<TransitionEvent>("~/transition_event", QosProfile::default())?,
        clock: node.get_ros_clock(),
    }));
    let qos = QosProfile::services_default;

    let machine = shared.clone();
    serve(spawner, node.create_service::<ChangeState::Service>("~/change_state", qos())?, move |request| {
        let mut machine = machine.borrow_mut();
        let requested = &request.transition;
        if exit::requested() {
            log::warn!("transition {} `{}` refused: the process is ending", requested.id, requested.label);
            return ChangeState::Response { success: false };
        }
        match machine.node.request(requested.id, &requested.label) {
            Ok(taken) => {
                machine.took(taken.edges[0].label, &taken);
                ChangeState::Response { success: taken.success() }
            }
            Err(refused) => {
                log::warn!("{refused}");
                ChangeState::Response { success: false }
            }
        }
    })?;

    let mut timer = node.create_wall_timer(Duration::from_millis(100))?;
    let machine = shared.clone();
    spawner.spawn_local(async move {
        if autostart {
            let mut machine = machine.borrow_mut();
            for taken in machine.node.bring_up() {
                machine.took("autostart", &taken);
            }
        }
        while timer.tick().await.is_ok() {
            let mut machine = machine.borrow_mut();
            while let Ok(fault) = faults.try_recv() {
                if let Some(taken) = machine.node.fault(&fault) {
                    let label = match fault {
                        Fault::Device(_) => "device fault",
                        Fault::ProtectiveStop(_) => "protective stop",
                    };
                    machine.took(label, &taken);
                }
            }
            for taken in machine.node.tick(Instant::now()) {
                machine.took("auto_recover", &taken);
            }
            // A finalized node ends at the tick after its shutdown, once the reply and the
            // transition events are out.
            if machine.node.lifecycle().state() == State::Finalized {
                finalized();
            }
        }
    })?;

    let machine = shared.clone();
    serve(spawner, node.create_service::<GetState::Service>("~/get_state", qos())?, move |_| GetState::Response {
        current_state: state(machine.borrow().node.lifecycle().state()),
    })?;
    serve(spawner, node.create_service::<GetAvailableStates::Service>("~/get_available_states", qos())?, |_| {
        GetAvailableStates::Response { available_states: State::ALL.into_iter().map(state).collect() }
    })?;
    let machine = shared.clone();
    serve(
        spawner,
        node.create_service::<GetAvailableTransitions::Service>("~/get_available_transitions", qos())?,
        move |_| GetAvailableTransitions::Response {
            available_transitions: machine.borrow().node.lifecycle().available().iter().map(description).collect(),
        },
    )?;
    serve(spawner, node.create_service::<GetAvailableTransitions::Service>("~/get_transition_graph", qos())?, |_| {
        GetAvailableTransitions::Response {
            available_transitions: Lifecycle::graph().iter().map(description).collect(),
        }
    })?;
    Ok(ServedLifecycle(shared))
}

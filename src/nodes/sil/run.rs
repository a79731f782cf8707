//! sil_node's run loop: trajectories run one after another (or again, with `loop`), paced to
//! the real-time factor, every frame handed on as a [`SilEvent`] (which the node's commands
//! answer their goals from: [`crate::nodes::sil::commands`]).

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::joint_goals::held_at;
use super::SilNodeSettings;
use crate::control::{Trajectory, TrajectoryError};
use crate::model::Robot;
use crate::sim::{Frame, RunStats, SilConfig, SimError, Simulation};

/// The latest a frame is handed on after it was due before the run is paced afresh from it.
const MAX_LATE: Duration = Duration::from_millis(50);

/// What the run loop reports.
#[derive(Debug, Clone)]
pub enum SilEvent {
    /// A run of this trajectory begins.
    RunStarted(Arc<Trajectory>),
    /// The simulation's next frame, at `clock_s` of simulated time since the node started
    /// (across runs and loops: the /clock value), to be published at `publish_rate_hz`, handed on
    /// `late_ns` after it was due in real time (a loaded machine, up to 50 ms, past which the
    /// run is paced afresh; 0 where it runs unpaced): what is published of it is stamped when it
    /// was due.
    Frame { frame: Frame, clock_s: f64, publish_rate_hz: f64, late_ns: u64 },
    /// A run ended: how, and its figures.
    RunEnded { stats: RunStats, end: RunEnd },
    /// A trajectory sent to the node was refused, for this reason.
    Refused(String),
}

impl SilEvent {
    /// This event as it stands `waited` after the run loop handed it on: a frame that much
    /// later. A frame is stamped the node's clock less its lateness: read after a wait for the
    /// publisher (its lock, a busy machine), the clock has gone on by the wait, and so has the
    /// lateness (a loaded pass saw /sil_node/state's stamps go back where it had not).
    pub fn later_by(&self, waited: Duration) -> Cow<'_, SilEvent> {
        match *self {
            SilEvent::Frame { frame, clock_s, publish_rate_hz, late_ns } => {
                let late_ns = late_ns.saturating_add(waited.as_nanos() as u64);
                Cow::Owned(SilEvent::Frame { frame, clock_s, publish_rate_hz, late_ns })
            }
            _ => Cow::Borrowed(self),
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// It reached the end of its trajectory.
    Complete,
    /// A new trajectory took its place.
    Replaced,
    /// [`RunRequest::Stop`] ended it.
    Stopped,
    Failed(SimError),
}

/// What the run loop is asked to do while the node runs.
#[derive(Debug, Clone)]
pub enum RunRequest {
    /// Run this trajectory now, in place of the running one, starting the arm at rest on its
    /// first waypoint (and again at its end under `loop`).
    Follow(Arc<Trajectory>),
    /// Go on along this trajectory from now, the simulated arm as it is, then hold its end until
    /// asked otherwise (a FollowJointTrajectory goal, a hold, a joint command: each starts where
    /// the arm or its reference is); started afresh if none runs.
    Steer(Arc<Trajectory>),
    /// End the running run; the simulation idles until the next trajectory.
    Stop,
}

/// What follows a run that reaches its end.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Ending {
    /// Its trajectory again, from the start, while `loop` is set; else idle.
    AsLoopSays,
    /// The simulation goes on holding the trajectory's end, one run after another
    /// ([`held_at`]: an hour each).
    Hold,
}

/// The settings the run loop reads as it goes.
#[derive(Debug, Clone, Copy)]
struct Pacing {
    real_time_factor: f64,
    publish_rate_hz: f64,
    repeat: bool,
}

impl Pacing {
    fn of(settings: &SilNodeSettings) -> Pacing {
        Pacing {
            real_time_factor: settings.real_time_factor,
            publish_rate_hz: settings.publish_rate_hz,
            repeat: settings.repeat,
        }
    }
}

/// Runs `first`, then every trajectory that `requests` asks for: a new one replaces the running
/// one at once (started afresh, or steered into with the arm as it is), [`RunRequest::Stop`]
/// ends it. A run started afresh repeats while `settings.repeat`; a steered one holds its end.
/// Runs until `stop` is set, handing every frame to `events`. `settings` is read as the run
/// goes, so a parameter set while it runs takes effect at the next frame.
pub fn run_sil(
    robot: &Robot,
    config: &SilConfig,
    settings: &Mutex<SilNodeSettings>,
    first: Arc<Trajectory>,
    requests: &Receiver<RunRequest>,
    stop: &AtomicBool,
    events: &mut dyn FnMut(&SilEvent),
) {
    let live = || {
        settings
            .lock()
            .map(|settings| Pacing::of(&settings))
            .unwrap_or_else(|_| Pacing::of(&SilNodeSettings::default()))
    };
    let mut clock_offset = 0.0;
    let (mut trajectory, mut ending) = (first, Ending::AsLoopSays);
    // A simulation steered into the next run, and the wall time that run starts at.
    let mut steered: Option<(Simulation, Instant)> = None;
    'runs: while !stop.load(Ordering::Relaxed) {
        events(&SilEvent::RunStarted(trajectory.clone()));
        let t0 = trajectory.start_time();
        let (mut simulation, start) = match steered.take() {
            Some(steered) => steered,
            None => match Simulation::new(robot.clone(), trajectory.clone(), config) {
                Ok(simulation) => (simulation, Instant::now()),
                Err(error) => {
                    // The node keeps serving: the next trajectory may start.
                    events(&SilEvent::RunEnded { stats: RunStats::default(), end: RunEnd::Failed(error) });
                    match idle(requests, stop) {
                        Some(next) => {
                            (trajectory, ending) = next;
                            continue 'runs;
                        }
                        None => return,
                    }
                }
            },
        };
        // Frame time `anchor_t` was due at wall time `anchor`; pacing restarts from the current
        // frame whenever the real-time factor changes.
        let (mut anchor, mut anchor_t, mut factor) = (start, t0, live().real_time_factor);
        // When the simulation's state was due: a steered run starts then.
        let state_due = |simulation: &Simulation, anchor: Instant, anchor_t: f64, factor: f64| {
            let ahead_s = if factor > 0.0 { ((simulation.time() - anchor_t) / factor).max(0.0) } else { 0.0 };
            anchor + Duration::from_secs_f64(ahead_s)
        };
        let mut end = RunEnd::Complete;
        while let Some(frame) = simulation.next() {
            // A failed run ends before any request is served: a request waiting is taken as
            // the simulation idles.
            let frame = match frame {
                Ok(frame) => frame,
                Err(failure) => {
                    end = RunEnd::Failed(failure);
                    break;
                }
            };
            match requests.try_recv() {
                Ok(request) => {
                    clock_offset += simulation.time() - t0;
                    events(&SilEvent::RunEnded { stats: simulation.stats().clone(), end: replaced_by(&request) });
                    let next = match request {
                        RunRequest::Steer(next) => {
                            let start = state_due(&simulation, anchor, anchor_t, factor);
                            simulation.steer(next.clone());
                            steered = Some((simulation, start));
                            (trajectory, ending) = (next, Ending::Hold);
                            continue 'runs;
                        }
                        RunRequest::Follow(next) => Some((next, Ending::AsLoopSays)),
                        RunRequest::Stop => None,
                    };
                    match next.or_else(|| idle(requests, stop)) {
                        Some(next) => {
                            (trajectory, ending) = next;
                            continue 'runs;
                        }
                        None => return,
                    }
                }
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => return,
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let now = live();
            if now.real_time_factor != factor {
                (anchor, anchor_t, factor) = (Instant::now(), frame.t, now.real_time_factor);
            }
            let mut late_ns = 0;
            if now.real_time_factor > 0.0 {
                let due = anchor + Duration::from_secs_f64((frame.t - anchor_t) / factor);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                let late = Instant::now().saturating_duration_since(due);
                match late > MAX_LATE {
                    // Paced from here: a stall is skipped, not caught up with frames stamped ever
                    // further in the past (a simulation slower than its real-time factor).
                    true => (anchor, anchor_t) = (Instant::now(), frame.t),
                    false => late_ns = late.as_nanos() as u64,
                }
            }
            let clock_s = clock_offset + frame.t - t0;
            events(&SilEvent::Frame { frame, clock_s, publish_rate_hz: now.publish_rate_hz, late_ns });
        }
        clock_offset += simulation.time() - t0;
        let complete = end == RunEnd::Complete;
        events(&SilEvent::RunEnded { stats: simulation.stats().clone(), end });
        match ending {
            Ending::Hold if complete => match held_end(robot, &trajectory) {
                Ok(held) => {
                    let start = state_due(&simulation, anchor, anchor_t, factor);
                    trajectory = Arc::new(held);
                    simulation.steer(trajectory.clone());
                    steered = Some((simulation, start));
                    continue;
                }
                Err(error) => log::error!("cannot hold the end of the run: {error}"),
            },
            Ending::AsLoopSays if live().repeat => continue,
            Ending::Hold | Ending::AsLoopSays => {}
        }
        match idle(requests, stop) {
            Some(next) => (trajectory, ending) = next,
            None => return,
        }
    }
}

/// The platform held still at the end of `trajectory`, with its forearm.
fn held_end(robot: &Robot, trajectory: &Trajectory) -> Result<Trajectory, TrajectoryError> {
    let end = trajectory.waypoints()[trajectory.waypoints().len() - 1].x;
    held_at(robot, end, (trajectory.elbow(), trajectory.l_arm()))
}

/// How a request ends the running run.
fn replaced_by(request: &RunRequest) -> RunEnd {
    match request {
        RunRequest::Follow(_) | RunRequest::Steer(_) => RunEnd::Replaced,
        RunRequest::Stop => RunEnd::Stopped,
    }
}

/// Waits for the next trajectory to run, and what follows its end (a Stop while idle changes
/// nothing); None once `stop` is set or the requests' sender is gone.
fn idle(requests: &Receiver<RunRequest>, stop: &AtomicBool) -> Option<(Arc<Trajectory>, Ending)> {
    loop {
        match requests.recv_timeout(Duration::from_millis(100)) {
            Ok(RunRequest::Follow(next)) => return Some((next, Ending::AsLoopSays)),
            Ok(RunRequest::Steer(next)) => return Some((next, Ending::Hold)),
            Ok(RunRequest::Stop) => {}
            Err(RecvTimeoutError::Timeout) if !stop.load(Ordering::Relaxed) => {}
            Err(_) => return None,
        }
    }
}

//! hil_node as a managed node, without ROS: configure opens the rig and checks that its sensor
//! speaks; activate starts the loop (the initial trajectory the first time, then holding where
//! the arm is); deactivate ends the loop with the motors stopped and the rig kept open; cleanup
//! and error processing release the rig.
//!
//! A loop that stops by itself (the sensor silent, a port gone, a fault in control) is a device
//! fault: the loop stops the motors as it ends, the node is told on its fault channel and goes
//! to unconfigured, and nothing is commanded until it is configured and activated again. A
//! protective stop (a bound of docs/hil.md tripped) leaves the rig open with the motors holding:
//! the node goes to inactive, its status an error naming the bound, until activated again. A
//! node that has lost its loop's feeder (its thread panicked, or did not start) cannot run a loop
//! again: error processing finalizes it, for a restart.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use super::feeder::{run_feeder, Feeder, RequestQueue};
use super::publisher::loop_failure;
use super::HilNodeConfig;
use crate::control::Trajectory;
use crate::drivers::open_hardware;
use crate::hil::{exit, FrameChannel, Hardware, HilLoop, HilReport, LoopStatus, TakenFrame, Withdrawals, FEED_DEPTH};
use crate::model::Robot;
use crate::nodes::lifecycle::{Fault, Managed, Outcome, Step};
use crate::nodes::status::Level;

/// Longest configure waits for the rig's first sensor reading.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Why no loop can start once the feeder is gone: it lives with the node's request queue.
const FEEDER_LOST: &str = "the loop's feeder was lost with its thread (it panicked or did not start)";

/// Where the node's state goes (in the ROS node: /diagnostics and the goal served).
pub trait HilReporter: Send + Sync + 'static {
    /// The node's status is now `level`, `message`.
    fn status(&self, level: Level, message: String);
    /// Loop `loop_number` starts (the node counts its loops from 1): its frames carry the number.
    fn loop_started(&self, loop_number: u64);
    /// The loop stopped, the motors holding: whatever it ran is over.
    fn loop_stopped(&self, end: &LoopEnd);
}

/// Why a loop ended, as what it ran hears it.
#[derive(Debug, Clone, PartialEq)]
pub enum LoopEnd {
    /// The node stopped it: a transition (deactivate, cleanup, shutdown) or the process ending.
    Asked(String),
    /// A bound of the protective stop tripped (the cause).
    ProtectiveStop(String),
    /// The rig failed, or control did (the cause).
    Fault(String),
}

impl LoopEnd {
    pub fn reason(&self) -> &str {
        match self {
            LoopEnd::Asked(reason) | LoopEnd::ProtectiveStop(reason) | LoopEnd::Fault(reason) => reason,
        }
    }
}

/// What the node's loop exchanges with the rest of the node, for every loop it runs.
pub struct HilLinks {
    /// Segments and goals for the loop's feeder.
    pub requests: RequestQueue,
    /// The loop's frames, for publishing.
    pub frames: SyncSender<TakenFrame>,
    /// The loop's figures, refreshed once a second.
    pub status: Arc<Mutex<LoopStatus>>,
    pub withdrawals: Arc<Withdrawals>,
    /// Device faults and protective stops, for the node's lifecycle.
    pub faults: Sender<Fault>,
}

struct RunningLoop {
    stop: Arc<AtomicBool>,
    run: JoinHandle<(HilReport, Box<dyn Hardware>)>,
    feeder: JoinHandle<(Feeder, RequestQueue)>,
}

/// hil_node's rig and loop under the lifecycle.
pub struct ManagedHil {
    config: HilNodeConfig,
    /// The run's starting trajectory: run by the first activation.
    initial: Trajectory,
    /// The feeder between loops; None while a loop runs.
    feeder: Option<(Feeder, RequestQueue)>,
    /// Whether a loop has run: later ones start where the arm is.
    resumed: bool,
    /// How many loops have started: the number of the latest.
    loops: u64,
    hardware: Option<Box<dyn Hardware>>,
    running: Option<RunningLoop>,
    /// Why the node stops the running loop, for what the loop ran.
    stopping_for: Arc<Mutex<String>>,
    frames: SyncSender<TakenFrame>,
    status: Arc<Mutex<LoopStatus>>,
    withdrawals: Arc<Withdrawals>,
    faults: Sender<Fault>,
    reporter: Arc<dyn HilReporter>,
    /// Why the last loop made a protective stop, if it did: the status while inactive.
    protective_stop: Arc<Mutex<Option<String>>>,
}

impl ManagedHil {
    /// The node of `config`, which runs `initial` when first activated.
    pub fn new(
        config: HilNodeConfig,
        robot: Robot,
        initial: Trajectory,
        links: HilLinks,
        reporter: Arc<dyn HilReporter>,
    ) -> ManagedHil {
        let feeder = Feeder::new(&initial, robot.clone(), config.hil.protection.clone(), links.withdrawals.clone());
        ManagedHil {
            config,
            initial,
            feeder: Some((feeder, links.requests)),
            resumed: false,
            loops: 0,
            hardware: None,
            running: None,
            stopping_for: Arc::default(),
            frames: links.frames,
            status: links.status,
            withdrawals: links.withdrawals,
            faults: links.faults,
            reporter,
            protective_stop: Arc::default(),
        }
    }

    /// Opens the rig and waits for its sensor.
    fn configure(&mut self) -> Outcome {
        if self.feeder.is_none() {
            return self.failed(format!("{FEEDER_LOST}; restart hil_node"));
        }
        let settings = &self.config.settings;
        let opened = open_hardware(
            settings.hardware,
            &self.config.devices(),
            &self.config.rig,
            &self.config.sil,
            &self.initial.waypoints()[0],
            self.initial.elbow(),
        );
        let mut hardware = match opened {
            Ok(hardware) => hardware,
            Err(error) => return self.failed(format!("cannot open the rig: {error}")),
        };
        if let Err(error) = hardware.check(CHECK_TIMEOUT) {
            return self.failed(format!("the rig does not answer: {error}"));
        }
        self.hardware = Some(hardware);
        self.reporter.status(Level::Ok, "inactive: rig open, nothing commanded".into());
        Outcome::Success
    }

    fn failed(&self, reason: String) -> Outcome {
        self.reporter.status(Level::Error, reason.clone());
        Outcome::Failure(reason)
    }

    /// The loop could not start, for `reason`: an error, said on the status too.
    fn failed_to_start(&self, reason: String) -> Outcome {
        self.reporter.status(Level::Error, reason.clone());
        Outcome::Error(reason)
    }

    /// Starts the loop on the open rig, and its feeder.
    fn activate(&mut self) -> Outcome {
        let Some((feeder, requests)) = self.feeder.take() else {
            return self.failed_to_start(format!("{FEEDER_LOST}; restart hil_node"));
        };
        let Some(hardware) = self.hardware.take() else {
            self.feeder = Some((feeder, requests));
            return self.failed_to_start("the rig is not open".into());
        };
        let stale = requests.drop_waiting();
        if stale > 0 {
            log::warn!("{stale} trajectory requests made while inactive dropped");
        }
        let (feed, samples) = sync_channel(FEED_DEPTH);
        let sil = &self.config.sil;
        let (elbow, l_arm) = (self.initial.elbow(), self.initial.l_arm());
        let stop = Arc::new(AtomicBool::new(false));
        let hil = match HilLoop::new(self.config.hil.clone(), sil, elbow, l_arm, hardware, samples, stop.clone()) {
            Ok(hil) => hil,
            Err(error) => {
                self.feeder = Some((feeder, requests));
                return self.failed_to_start(format!("cannot start the loop: {error}; the rig is closed"));
            }
        };
        // Each loop's frames carry its number: those of a loop that stopped, still on their way
        // to the node, are told from the next one's.
        self.loops += 1;
        let loop_number = self.loops;
        let hil = hil
            .with_frames(Box::new(FrameChannel::new(self.frames.clone(), loop_number)))
            .with_status(self.status.clone())
            .with_withdrawals(self.withdrawals.clone());
        // A loop resumed holds where the arm is: the withdrawal it makes at its start says where.
        let (hil, feeder) = match self.resumed {
            true => (hil.starting_where_the_arm_is(), feeder.holding(self.withdrawals.request())),
            false => (hil, feeder),
        };
        self.resumed = true;
        if let Ok(mut last) = self.protective_stop.lock() {
            *last = None;
        }
        // Told before its threads start, so that its first frame is taken.
        self.reporter.loop_started(loop_number);
        let feeder_stop = stop.clone();
        let feeding = std::thread::Builder::new()
            .name("hil-feed".into())
            .spawn(move || run_feeder(feeder, requests, feed, &feeder_stop));
        let Ok(feeding) = feeding else {
            // The feeder went with the thread, and the loop with its rig goes here.
            drop(hil);
            self.reporter.loop_stopped(&LoopEnd::Fault("the loop's feeder thread did not start".into()));
            return self.failed_to_start("cannot start the loop's feeder thread; the rig is closed".into());
        };
        let (reporter, faults) = (self.reporter.clone(), self.faults.clone());
        let (protective_stop, stopping_for, asked) =
            (self.protective_stop.clone(), self.stopping_for.clone(), stop.clone());
        let run = std::thread::Builder::new().name("hil-loop".into()).spawn(move || {
            let (report, hardware) = hil.run_and_release();
            match &report.outcome {
                Ok(()) if asked.load(Ordering::Acquire) => {
                    let why = stopping_for.lock().map(|why| why.clone()).unwrap_or_default();
                    reporter.loop_stopped(&LoopEnd::Asked(why));
                }
                Ok(()) if exit::requested() => {
                    let why = if exit::panicked() { "a panic ends the process" } else { "the process is ending" };
                    reporter.loop_stopped(&LoopEnd::Asked(format!("hil_node was shut down: {why}")));
                }
                Ok(()) => {
                    // Not asked to: its feed ended (the feeder's thread went away).
                    let cause = "loop stopped, motors stopped: its feed ended".to_owned();
                    reporter.status(Level::Error, cause.clone());
                    reporter.loop_stopped(&LoopEnd::Fault(cause.clone()));
                    let _ = faults.send(Fault::Device(cause));
                }
                Err(error) => {
                    let cause = loop_failure(error);
                    reporter.status(Level::Error, cause.clone());
                    match error.protective_stop() {
                        Some(_) => {
                            reporter.loop_stopped(&LoopEnd::ProtectiveStop(cause.clone()));
                            if let Ok(mut last) = protective_stop.lock() {
                                *last = Some(cause.clone());
                            }
                            let _ = faults.send(Fault::ProtectiveStop(error.to_string()));
                        }
                        None => {
                            reporter.loop_stopped(&LoopEnd::Fault(cause.clone()));
                            let _ = faults.send(Fault::Device(cause));
                        }
                    }
                }
            }
            (report, hardware)
        });
        match run {
            Ok(run) => {
                self.running = Some(RunningLoop { stop, run, feeder: feeding });
                Outcome::Success
            }
            Err(_) => {
                // The loop and its rig went with the thread that did not start (the rig stops
                // as it drops); the feeder is kept for the next.
                stop.store(true, Ordering::Relaxed);
                self.feeder = feeding.join().ok();
                self.reporter.loop_stopped(&LoopEnd::Fault("the loop's thread did not start".into()));
                self.failed_to_start("cannot start the loop's thread; the rig is closed".into())
            }
        }
    }

    /// Ends the loop, if one runs, for `why`: the motors stop, the rig stays open.
    fn stop_loop(&mut self, why: &str) -> Outcome {
        let Some(running) = self.running.take() else { return Outcome::Success };
        if let Ok(mut stopping_for) = self.stopping_for.lock() {
            *stopping_for = why.to_owned();
        }
        // Release: the feeder that sees the flag and ends the feed, and the loop that then finds it
        // ended, see what came before (why it was set).
        running.stop.store(true, Ordering::Release);
        let (run, feeder) = (running.run.join(), running.feeder.join());
        let (loop_panicked, feeder_panicked) = (run.is_err(), feeder.is_err());
        // What came back is kept: a thread's panic loses only its own part.
        self.hardware = run.ok().map(|(_, hardware)| hardware);
        self.feeder = feeder.ok();
        if !(loop_panicked || feeder_panicked) {
            return Outcome::Success;
        }
        // A panic there is a fault: its rig stopped as it unwound (and from the panic hook). A
        // loop that panicked never told the node: its goals end here. In hil_node one whose
        // feeder panicked told it: the panic hook asked the process to end, which the loop saw
        // and reported (without the hook, as its feed ended).
        let cause = if loop_panicked { "a loop thread panicked" } else { "the loop's feeder thread panicked" };
        self.reporter.status(Level::Error, cause.to_owned());
        if loop_panicked {
            self.reporter.loop_stopped(&LoopEnd::Fault(cause.to_owned()));
        }
        Outcome::Error(cause.to_owned())
    }

    /// Ends the loop for `why` and closes the rig.
    fn release(&mut self, why: &str) -> Outcome {
        let outcome = self.stop_loop(why);
        self.hardware = None;
        outcome
    }
}

impl Managed for ManagedHil {
    fn on(&mut self, step: Step) -> Outcome {
        match step {
            Step::Configure => self.configure(),
            Step::Activate => self.activate(),
            Step::Deactivate => {
                let outcome = self.stop_loop("hil_node was deactivated");
                let stopped = self.protective_stop.lock().ok().and_then(|last| last.clone());
                match (&outcome, stopped) {
                    (Outcome::Success, Some(cause)) => self.reporter.status(Level::Error, format!("inactive: {cause}")),
                    (Outcome::Success, None) => {
                        self.reporter.status(Level::Ok, "inactive: loop stopped, motors holding".into())
                    }
                    _ => {}
                }
                outcome
            }
            Step::Cleanup | Step::Shutdown => {
                let why = if step == Step::Cleanup { "hil_node was cleaned up" } else { "hil_node was shut down" };
                let outcome = self.release(why);
                if outcome == Outcome::Success {
                    self.reporter.status(Level::Ok, "unconfigured: rig closed".into());
                }
                outcome
            }
            // After a fault: its cause stays on the status until the node is configured again.
            Step::Recover => {
                let outcome = self.release("hil_node is recovering from a fault");
                match self.feeder {
                    // Unconfigured, it could never be configured again: finalized, for a restart.
                    None => Outcome::Failure(format!("{FEEDER_LOST}; restart hil_node")),
                    Some(_) => outcome,
                }
            }
        }
    }
}

impl Drop for ManagedHil {
    fn drop(&mut self) {
        let _ = self.release("hil_node is ending");
    }
}

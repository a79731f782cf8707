//! A serial device's driver as a managed node: configure opens the port and waits for the
//! device to answer, activate lets commands through (after what the device needs first),
//! deactivate stops them with the device held, cleanup and error processing release the port.
//! A link lost while configured is a device fault: the node goes to unconfigured and commands
//! nothing until it is configured and activated again. While no driver runs, the node's status
//! still goes to /diagnostics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::lifecycle::{Fault, Managed, Outcome, Step};
use crate::hil::exit;
use crate::outputs::{pump_events, Outputs, Publisher, Sink};

/// How long configure waits for the device's first answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How often configure looks whether the process is to end ([`exit::requested`]) while it waits
/// for the device.
const INTERRUPT_CHECK: Duration = Duration::from_millis(50);

/// What the managed node needs of a device and its driver.
pub trait SerialDevice: Send + Sync + 'static {
    type Driver: Send + 'static;
    type Commander: Clone + Send + 'static;
    type Event: Send + 'static;
    type Topics: Publisher<Event = Self::Event> + Send + 'static;

    /// Starts the driver on the node's port (`auto`: where the device is found).
    fn open(&self) -> std::io::Result<Self::Driver>;
    fn events(driver: &Self::Driver) -> &std::sync::mpsc::Receiver<Self::Event>;
    fn commander(driver: &Self::Driver) -> Self::Commander;
    /// Stops the driver and releases the port.
    fn close(driver: Self::Driver);
    /// Whether `event` says the device answers.
    fn answered(event: &Self::Event) -> bool;
    /// Why the link is lost, if `event` says it is.
    fn lost(event: &Self::Event) -> Option<String>;
    /// Why the port cannot be opened, if `event` says so (the driver retries meanwhile).
    fn unavailable(event: &Self::Event) -> Option<String>;
    /// Logs what the node logs of `event` (the rest is on its topics).
    fn log(&self, event: &Self::Event);
    /// Takes note of `event` (where the device is, say), as every event arrives.
    fn heard(&self, _event: &Self::Event) {}
    /// Asks the device, once it answers, for what the node publishes (a datastream, say).
    fn configured(&self, commander: &Self::Commander) -> Result<(), String>;
    /// Sends what the device needs before commands flow.
    fn activate(&self, commander: &Self::Commander) -> Result<(), String>;
    /// Sends what holds the device safe once commands stop.
    fn deactivate(&self, commander: &Self::Commander) -> Result<(), String>;
}

/// Where the node's command sources (subscriptions, parameters) get the commander: there only
/// while the node is active.
pub struct Commanding<C>(Arc<Mutex<Option<C>>>);

impl<C> Clone for Commanding<C> {
    fn clone(&self) -> Self {
        Commanding(self.0.clone())
    }
}

impl<C: Clone> Commanding<C> {
    /// The commander, or why there is none.
    pub fn get(&self) -> Result<C, String> {
        let commander = self.0.lock().ok().and_then(|commander| commander.clone());
        commander.ok_or_else(|| "the node is not active: nothing is commanded until it is activated".to_owned())
    }

    fn set(&self, commander: Option<C>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = commander;
        }
    }
}

struct Running<D: SerialDevice, S> {
    commander: D::Commander,
    stop: Arc<AtomicBool>,
    pump: JoinHandle<(D::Topics, Outputs<S>)>,
}

/// The node: its device, its topics (published from the driver's events while configured), and
/// the driver while it runs.
pub struct ManagedDriver<D: SerialDevice, S> {
    device: Arc<D>,
    idle: Option<(D::Topics, Outputs<S>)>,
    running: Option<Running<D, S>>,
    commanding: Commanding<D::Commander>,
    faults: Sender<Fault>,
    now_ns: Clock,
    observer: Observer<D::Event>,
    stopping: Stopping,
}

/// What hears that the node stops commanding, and why (its goal followed ends then).
pub type Stopping = Box<dyn FnMut(&str) + Send>;

/// What else sees the device's events while the driver runs, at their time [ns] (the node's
/// trajectory follower, say).
pub type Observer<E> = Arc<dyn Fn(&E, u64) + Send + Sync>;

/// The node's clock [ns since its epoch].
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

impl<D: SerialDevice, S: Sink + Send + 'static> ManagedDriver<D, S> {
    /// The node of `device` with its topics, stamped `now_ns()`; device faults go to `faults`.
    pub fn new(
        device: D,
        topics: (D::Topics, Outputs<S>),
        faults: Sender<Fault>,
        now_ns: Clock,
    ) -> ManagedDriver<D, S> {
        ManagedDriver {
            device: Arc::new(device),
            idle: Some(topics),
            running: None,
            commanding: Commanding(Arc::new(Mutex::new(None))),
            faults,
            now_ns,
            observer: Arc::new(|_, _| {}),
            stopping: Box::new(|_| {}),
        }
    }

    /// `stopping` hears, before the device is told to hold, every transition that ends the
    /// node's commanding (deactivate, cleanup, shutdown, error processing), named: the goal the
    /// node follows ends then.
    pub fn stopping_with(mut self, stopping: Stopping) -> ManagedDriver<D, S> {
        self.stopping = stopping;
        self
    }

    /// `observer` sees every event the running driver sends, as it arrives.
    pub fn observed_by(mut self, observer: Observer<D::Event>) -> ManagedDriver<D, S> {
        self.observer = observer;
        self
    }

    /// Where command sources get the commander.
    pub fn commanding(&self) -> Commanding<D::Commander> {
        self.commanding.clone()
    }

    /// Opens the device and waits for its first answer, publishing what it sends meanwhile;
    /// then its events are published on a thread of their own.
    fn configure(&mut self) -> Outcome {
        let Some((mut topics, mut out)) = self.idle.take() else {
            return Outcome::Error("the node's topics are with a driver already".into());
        };
        let driver = match self.device.open() {
            Ok(driver) => driver,
            Err(error) => {
                self.idle = Some((topics, out));
                return Outcome::Failure(format!("cannot start the driver: {error}"));
            }
        };
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        // Why the device has not answered yet, should it not answer in time.
        let mut silent = format!("the device did not answer within {} s", ANSWER_TIMEOUT.as_secs());
        let answered = loop {
            if exit::requested() {
                break Err("interrupted".to_owned());
            }
            let wait = deadline.saturating_duration_since(Instant::now()).min(INTERRUPT_CHECK);
            let event = match D::events(&driver).recv_timeout(wait) {
                Ok(event) => event,
                Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => continue,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break Err(silent),
            };
            self.device.log(&event);
            if let Err(error) = topics.event(&mut out, (self.now_ns)(), Some(&event)) {
                log::warn!("publishing failed: {error}");
            }
            if D::answered(&event) {
                break Ok(());
            }
            if let Some(reason) = D::unavailable(&event) {
                silent = format!("{reason} (retried for {} s)", ANSWER_TIMEOUT.as_secs());
            }
        };
        if let Err(reason) = answered {
            D::close(driver);
            self.idle = Some((topics, out));
            return Outcome::Failure(reason);
        }
        let commander = D::commander(&driver);
        if let Err(reason) = self.device.configured(&commander) {
            D::close(driver);
            self.idle = Some((topics, out));
            return Outcome::Failure(reason);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (device, faults, now_ns, pump_stop, observer) =
            (self.device.clone(), self.faults.clone(), self.now_ns.clone(), stop.clone(), self.observer.clone());
        let pump = std::thread::Builder::new().name("device-events".into()).spawn(move || {
            let published = pump_events(D::events(&driver), &pump_stop, topics, out, &*now_ns, |event| {
                device.log(event);
                device.heard(event);
                observer(event, now_ns());
                if let Some(reason) = D::lost(event) {
                    let _ = faults.send(Fault::Device(reason));
                }
            });
            D::close(driver);
            published
        });
        match pump {
            Ok(pump) => {
                self.running = Some(Running { commander, stop, pump });
                Outcome::Success
            }
            Err(error) => Outcome::Error(format!("cannot start the event thread: {error}")),
        }
    }

    /// Stops the driver, releases the port and takes the topics back.
    fn release(&mut self) -> Outcome {
        self.commanding.set(None);
        let Some(running) = self.running.take() else { return Outcome::Success };
        running.stop.store(true, Ordering::Relaxed);
        match running.pump.join() {
            Ok(topics) => {
                self.idle = Some(topics);
                Outcome::Success
            }
            Err(_) => Outcome::Error("the event thread panicked".into()),
        }
    }
}

impl<D: SerialDevice, S: Sink + Send + 'static> Managed for ManagedDriver<D, S> {
    fn on(&mut self, step: Step) -> Outcome {
        let stopping = match step {
            Step::Deactivate => Some("the node was deactivated"),
            Step::Cleanup => Some("the node was cleaned up"),
            Step::Shutdown => Some("the node was shut down"),
            Step::Recover => Some("the device failed"),
            Step::Configure | Step::Activate => None,
        };
        if let Some(why) = stopping {
            (self.stopping)(why);
        }
        match step {
            Step::Configure => self.configure(),
            Step::Activate => {
                let Some(running) = &self.running else { return Outcome::Error("no driver runs".into()) };
                match self.device.activate(&running.commander) {
                    Ok(()) => {
                        self.commanding.set(Some(running.commander.clone()));
                        Outcome::Success
                    }
                    Err(reason) => Outcome::Failure(reason),
                }
            }
            Step::Deactivate => {
                self.commanding.set(None);
                match &self.running {
                    Some(running) => match self.device.deactivate(&running.commander) {
                        Ok(()) => Outcome::Success,
                        Err(reason) => Outcome::Error(reason),
                    },
                    None => Outcome::Success,
                }
            }
            Step::Cleanup | Step::Shutdown | Step::Recover => self.release(),
        }
    }

    /// Publishes the node's status while no driver runs (the link as last seen).
    fn tick(&mut self) {
        if let Some((topics, out)) = &mut self.idle {
            if let Err(error) = topics.event(out, (self.now_ns)(), None) {
                log::warn!("publishing failed: {error}");
            }
        }
    }
}

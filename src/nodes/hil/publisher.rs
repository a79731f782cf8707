//! What hil_node publishes, and when: the arm's topics from the loop's frames at the publish
//! rate (of loop time), stamped when the loop took each frame, the loop's figures on `~/loop_statistics` and /diagnostics once a
//! second while it runs, and the node's status at once when it changes. The r2r node and
//! `arm_hil hil --bag/--live` only feed it [`HilEvent`]s, through [`publish_loop`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::hil::fault_injection::FaultInjection;
use crate::hil::{HilError, LoopStatus, TakenFrame};
use crate::model::Robot;
use crate::nodes::robot_state::Urdf;
use crate::nodes::status::{Level, Status};
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::nodes::Decimator;
use crate::outputs::{Outputs, Publisher, Sink, SinkError};
use crate::sim::Frame;

/// hil_node's status on /diagnostics.
pub const STATUS_NAME: &str = "hil_node: loop";

/// The status while a loop runs.
pub const RUNNING: &str = "running";

/// How often the loop's figures go out [ns].
const FIGURES_PERIOD_NS: u64 = 1_000_000_000;

/// What happens to hil_node that it publishes.
#[derive(Debug, Clone)]
pub enum HilEvent {
    /// A frame of loop `loop_number` ([`crate::hil::TakenFrame`]: the running loop's, or one of
    /// a loop that has since stopped), taken `age_ns` before it is handed on: what is published
    /// of it is stamped that much before the time it goes out at, the time the loop took it.
    Frame { frame: Frame, loop_number: u64, age_ns: u64 },
    /// The running loop's figures so far (handed over every 100 ms at most).
    Figures(LoopStatus),
    /// A loop started.
    LoopStarted,
    /// The node's state changed (configured, a fault, a protective stop): no loop runs, and
    /// figures that come after no longer count.
    Status(Level, String),
}

impl HilEvent {
    /// This event `waited` after the publishing thread took it up: a frame that much older. A
    /// frame is stamped the node's clock less its age: read after a wait for the publisher (its
    /// lock, a busy machine), the clock has gone on by the wait, and so has the age.
    pub fn waited(&mut self, waited: Duration) {
        if let HilEvent::Frame { age_ns, .. } = self {
            *age_ns = age_ns.saturating_add(waited.as_nanos() as u64);
        }
    }
}

/// hil_node's publisher.
#[derive(Debug)]
pub struct HilPublisher {
    arm: ArmTopics,
    samples: Decimator,
    diagnostics: Diagnostics,
    looping: bool,
    /// When the figures are next due [ns], and the overruns counted when they last went out.
    next_figures_ns: u64,
    overruns_before: u64,
}

impl HilPublisher {
    /// Advertises hil_node's topics, points in `frame_id`, samples at `publish_rate_hz` of loop
    /// time, its status naming `hardware`; with `robot_state`, robot_state_publisher's too
    /// (where none runs beside), their latched messages published at `start_ns`.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        robot: Robot,
        frame_id: &str,
        publish_rate_hz: f64,
        hardware: &str,
        robot_state: Option<&Urdf>,
        start_ns: u64,
    ) -> Result<HilPublisher, SinkError> {
        let mut arm = ArmTopics::advertise(out, robot, ArmTopicSet::HIL_NODE, frame_id, robot_state)?;
        let diagnostics = Diagnostics::advertise(out, Status::new(STATUS_NAME, hardware))?;
        // Every topic is advertised before anything is published.
        arm.start(out, start_ns)?;
        Ok(HilPublisher {
            arm,
            samples: Decimator::new(publish_rate_hz),
            diagnostics,
            looping: false,
            next_figures_ns: 0,
            overruns_before: 0,
        })
    }

    /// Publishes what `event` (None: the passing of time) makes due at `time_ns`. True when a
    /// sample of the arm went out (a goal's feedback goes with it).
    pub fn publish<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&HilEvent>,
    ) -> Result<bool, SinkError> {
        let mut sampled = false;
        // While a loop runs its status goes out with its figures, once a second: were it also
        // on the status's own schedule, a message that changes each second (the overruns in
        // it) would go out twice a second. Otherwise it goes out when it changes and once a
        // second.
        let report = match event {
            Some(HilEvent::Frame { frame, age_ns, .. }) if self.samples.due(frame.t) => {
                let elbow = self.arm.robot().elbow();
                self.arm.sample(out, time_ns.saturating_sub(*age_ns), frame, &elbow)?;
                sampled = true;
                false
            }
            Some(HilEvent::Frame { .. }) => false,
            Some(HilEvent::Figures(figures)) if self.looping && time_ns >= self.next_figures_ns => {
                self.next_figures_ns = time_ns + FIGURES_PERIOD_NS;
                let overruns_before = std::mem::replace(&mut self.overruns_before, figures.overruns);
                self.diagnostics.set(|status| loop_status(status, figures, overruns_before));
                self.arm.loop_statistics(out, time_ns, figures)?;
                true
            }
            Some(HilEvent::Figures(_)) => false,
            Some(HilEvent::LoopStarted) => {
                self.looping = true;
                self.next_figures_ns = time_ns + FIGURES_PERIOD_NS;
                self.overruns_before = 0;
                self.diagnostics.set(|status| status.set(Level::Ok, RUNNING, Vec::new()));
                true
            }
            Some(HilEvent::Status(level, message)) => {
                self.looping = false;
                self.diagnostics.set(|status| status.set(*level, message.clone(), Vec::new()));
                true
            }
            None => false,
        };
        match (report, self.looping) {
            (true, _) => self.diagnostics.publish(out, time_ns)?,
            (false, false) => self.diagnostics.publish_due(out, time_ns)?,
            (false, true) => {}
        }
        Ok(sampled)
    }
}

impl Publisher for HilPublisher {
    type Event = HilEvent;

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&HilEvent>,
    ) -> Result<(), SinkError> {
        self.publish(out, time_ns, event).map(drop)
    }
}

/// The status a loop that failed leaves: why, and what the motors do.
pub fn loop_failure(error: &HilError) -> String {
    match error.protective_stop() {
        Some(_) => format!("{error}; motors holding, rig open"),
        None => format!("loop stopped, motors stopped: {error}"),
    }
}

/// Hands a loop's `frames`, and its `figures` every 100 ms at most, to `publish` until `stop`
/// is set or the loop has gone and dropped its end of `frames`. The r2r node and the command
/// line run this on their publishing thread.
pub fn publish_loop(
    frames: &Receiver<TakenFrame>,
    stop: &AtomicBool,
    figures: impl Fn() -> LoopStatus,
    mut publish: impl FnMut(HilEvent),
) {
    const TICK: Duration = Duration::from_millis(100);
    let mut last_figures = std::time::Instant::now();
    let injected = FaultInjection::for_this_thread();
    while !stop.load(Ordering::Relaxed) {
        injected.check();
        match frames.recv_timeout(TICK) {
            Ok(taken) => {
                publish(HilEvent::Frame { frame: taken.frame, loop_number: taken.loop_number, age_ns: taken.age_ns() })
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if last_figures.elapsed() >= TICK {
            last_figures = std::time::Instant::now();
            publish(HilEvent::Figures(figures()));
        }
    }
}

/// hil_node's status from the loop's figures: OK while no cycle overran since the last report
/// (when the loop had `overruns_before` overruns), else a warning with the count.
fn loop_status(status: &mut Status, snapshot: &LoopStatus, overruns_before: u64) {
    let (level, message) = match snapshot.overruns.saturating_sub(overruns_before) {
        0 => (Level::Ok, RUNNING.to_owned()),
        new => (Level::Warn, format!("running; {new} overruns in the last second")),
    };
    let values = vec![
        ("cycles", snapshot.cycles.to_string()),
        ("overruns", snapshot.overruns.to_string()),
        ("jitter_p50_us", format!("{:.0}", snapshot.jitter_p50_us)),
        ("jitter_p99_us", format!("{:.0}", snapshot.jitter_p99_us)),
        ("jitter_max_us", format!("{:.1}", snapshot.jitter_max_us)),
        ("rms_error_m", format!("{:.6}", snapshot.rms_error_m)),
        ("sensor_readings", snapshot.sensor_readings.to_string()),
        ("rejected_readings", snapshot.rejected_readings.to_string()),
        ("starved_cycles", snapshot.starved_cycles.to_string()),
    ];
    status.set(level, message, values);
}

//! How hil_node's trajectory segments (`~/trajectory`), goals and commands reach the running
//! loop: a pure [`Feeder`] queue, bounded, and the thread that moves it into the loop's feed,
//! which takes requests through a bounded queue of its own ([`feed_requests`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use crate::control::{Trajectory, Waypoint};
use crate::hil::protection::{PathStart, ProtectionConfig};
use crate::hil::{FeedItem, Withdrawals};
use crate::model::math::Vec3;
use crate::model::Robot;
use crate::nodes::trajectory_input::MultiDofPoint;

/// The most samples the feeder holds for the loop: a long trajectory of the port-5555 size.
pub const MAX_QUEUED_SAMPLES: usize = crate::control::MAX_WAYPOINTS;

/// The most requests that wait for the feeder; more are refused (a flood of segments, say).
pub const REQUEST_DEPTH: usize = 64;

/// Why a segment was not appended.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SegmentError {
    #[error("point {index}: {reason}")]
    Point { index: usize, reason: String },
    #[error("{points} points would not fit beside the {queued} queued (at most {MAX_QUEUED_SAMPLES})")]
    Full { queued: usize, points: usize },
    #[error("{0}")]
    Bounds(String),
    #[error("the HIL loop has not held the arm for withdrawal {0} yet: the segment has nowhere to start from")]
    HoldNotMade(u64),
    #[error(
        "the HIL loop held nothing at withdrawal {0} (its trajectory had ended): the segment has nowhere to start from"
    )]
    NothingHeld(u64),
}

/// Turns a trajectory segment into samples timed from the segment's start, continuing from
/// `last` (the last position fed): each point's time_from_start must grow from zero, every value
/// must be finite and every point reachable. Each point needs one transform; velocities and
/// accelerations default to zero.
pub fn segment_after(points: &[MultiDofPoint], last: &Vec3, robot: &Robot) -> Result<Vec<Waypoint>, SegmentError> {
    let mut samples = Vec::with_capacity(points.len());
    let mut previous = (0.0, robot.inverse_kinematics(last, None).ok());
    for (index, point) in points.iter().enumerate() {
        let fail = |reason: String| SegmentError::Point { index, reason };
        let [translation] = point.translations.as_slice() else {
            return Err(fail(format!("{} transforms; one is expected", point.translations.len())));
        };
        let first_or_zero = |values: &[[f64; 3]]| values.first().map_or(Vec3::zeros(), |v| Vec3::from(*v));
        let sample = Waypoint {
            t: point.time_from_start_s,
            x: Vec3::from(*translation),
            xd: first_or_zero(&point.linear_velocities),
            xdd: first_or_zero(&point.linear_accelerations),
        };
        let finite = [sample.x, sample.xd, sample.xdd].iter().all(|v| v.iter().all(|c| c.is_finite()));
        if !(finite && sample.t.is_finite()) {
            return Err(fail("a value is not finite".into()));
        }
        if !(sample.t > previous.0) {
            return Err(fail(format!("time {} s is not after {} s", sample.t, previous.0)));
        }
        let theta =
            robot.inverse_kinematics(&sample.x, previous.1.as_ref()).map_err(|error| fail(error.to_string()))?;
        previous = (sample.t, Some(theta));
        samples.push(sample);
    }
    Ok(samples)
}

/// How far a goal's first waypoint may be from where the arm's reference holds [m]: the loop
/// does not jump to a goal, it starts it where the arm is.
pub const GOAL_START_TOLERANCE_M: f64 = 0.005;

/// The sending end of the feeder's requests: at most [`REQUEST_DEPTH`] wait at a time.
#[derive(Debug, Clone)]
pub struct FeedRequests {
    sender: Sender<FeedRequest>,
    waiting: Arc<AtomicUsize>,
}

/// The feeder's end of its requests.
#[derive(Debug)]
pub struct RequestQueue {
    receiver: Receiver<FeedRequest>,
    waiting: Arc<AtomicUsize>,
}

/// A bounded queue of requests for the feeder.
pub fn feed_requests() -> (FeedRequests, RequestQueue) {
    let (sender, receiver) = channel();
    let waiting = Arc::new(AtomicUsize::new(0));
    (FeedRequests { sender, waiting: waiting.clone() }, RequestQueue { receiver, waiting })
}

impl FeedRequests {
    /// Whether a request can be sent now: a sender checks before it claims anything (a
    /// withdrawal) for the request.
    pub fn room(&self) -> Result<(), String> {
        match self.waiting.load(Ordering::Acquire) < REQUEST_DEPTH {
            true => Ok(()),
            false => Err(format!("{REQUEST_DEPTH} requests already wait for the HIL loop's feeder")),
        }
    }

    /// Sends `request`, if there is room.
    pub fn send(&self, request: FeedRequest) -> Result<(), String> {
        self.room()?;
        self.send_past_the_bound(request)
    }

    /// Sends `request` whether or not there is room (a hold: `HilCommands` says when).
    pub fn send_past_the_bound(&self, request: FeedRequest) -> Result<(), String> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        self.sender.send(request).map_err(|_| {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            "the HIL loop's feeder has stopped".to_owned()
        })
    }
}

impl RequestQueue {
    fn taken(&self, request: FeedRequest) -> FeedRequest {
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        request
    }

    fn try_recv(&self) -> Result<FeedRequest, TryRecvError> {
        self.receiver.try_recv().map(|request| self.taken(request))
    }

    /// How many requests wait.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// The next request waiting, if any.
    pub fn try_take(&self) -> Option<FeedRequest> {
        self.try_recv().ok()
    }

    fn recv_timeout(&self, timeout: Duration) -> Result<FeedRequest, RecvTimeoutError> {
        self.receiver.recv_timeout(timeout).map(|request| self.taken(request))
    }

    /// Drops every request waiting (made while no loop ran); how many.
    pub fn drop_waiting(&self) -> usize {
        std::iter::from_fn(|| self.try_take()).count()
    }
}

/// What hil_node's feeder is asked.
#[derive(Debug, Clone)]
pub enum FeedRequest {
    /// A `~/trajectory` segment: it follows what is queued.
    Append(Vec<MultiDofPoint>),
    /// A goal: withdrawal `withdrawal` takes back what is queued, then the trajectory runs from
    /// its first waypoint, where the arm holds.
    Follow { trajectory: Arc<Trajectory>, withdrawal: u64 },
    /// Withdrawal `withdrawal` takes back what is queued; the arm holds where it is.
    Hold { withdrawal: u64 },
}

/// What hil_node sends the loop, in order: the initial trajectory, then segments and goals as
/// they are asked for. Pure: the feeding thread moves [`Feeder::front`] into the loop's feed as
/// it has room, and hands requests to [`Feeder::request`] as they come.
#[derive(Debug)]
pub struct Feeder {
    robot: Robot,
    bounds: ProtectionConfig,
    queue: VecDeque<FeedItem>,
    /// Where a segment continues from.
    start: SegmentStart,
    /// Where the loop held for each withdrawal.
    withdrawals: Arc<Withdrawals>,
}

/// Where the loop's ring starts the next segment.
#[derive(Debug, Clone, Copy)]
enum SegmentStart {
    /// At a single position queued [m], at rest there.
    AtRest(Vec3),
    /// After the last line queued, from `from` to `to` [m] in `dt_s` [s]: the arm may still move
    /// along it as the segment begins (the ring interpolates linearly), so the change of speed
    /// from it is checked. A trajectory that ends at rest ends on a line of no length.
    Moving { from: Vec3, to: Vec3, dt_s: f64 },
    /// Where the loop holds for withdrawal `n` (a hold, or a loop resumed where the arm is),
    /// known once the loop has made it.
    Hold(u64),
}

impl SegmentStart {
    /// Where a segment goes on from after `waypoints`: along their last line.
    fn after(waypoints: &[Waypoint]) -> SegmentStart {
        match waypoints {
            [.., before, last] => SegmentStart::Moving { from: before.x, to: last.x, dt_s: last.t - before.t },
            [last] => SegmentStart::AtRest(last.x),
            [] => SegmentStart::AtRest(Vec3::zeros()),
        }
    }
}

impl Feeder {
    /// Queues `initial`, run at its own times; segments are held to the protective stop's
    /// `bounds`, and start where the loop says in `withdrawals` it holds after a withdrawal.
    pub fn new(initial: &Trajectory, robot: Robot, bounds: ProtectionConfig, withdrawals: Arc<Withdrawals>) -> Feeder {
        let queue: VecDeque<FeedItem> = initial.waypoints().iter().map(|&sample| FeedItem::Sample(sample)).collect();
        Feeder { robot, bounds, queue, start: SegmentStart::after(initial.waypoints()), withdrawals }
    }

    /// The feeder of a loop that resumes holding where the arm is, as withdrawal `withdrawal`
    /// (asked of it before it starts): nothing queued; segments continue from where it holds.
    pub fn holding(mut self, withdrawal: u64) -> Feeder {
        self.hold(withdrawal);
        self
    }

    /// Whether the next segment waits for the loop to make a withdrawal (within a cycle of the
    /// loop's, while one runs).
    pub fn awaits_hold(&self) -> bool {
        matches!(self.start, SegmentStart::Hold(n) if self.withdrawals.done_at(n).is_none())
    }

    /// The next item for the loop.
    pub fn front(&self) -> Option<&FeedItem> {
        self.queue.front()
    }

    /// The loop took [`Feeder::front`].
    pub fn sent(&mut self) {
        self.queue.pop_front();
    }

    /// Acts on `request`; a segment that cannot be run is refused with the reason.
    pub fn request(&mut self, request: FeedRequest) -> Result<(), SegmentError> {
        match request {
            FeedRequest::Append(points) => {
                if self.queue.len() + points.len() > MAX_QUEUED_SAMPLES {
                    return Err(SegmentError::Full { queued: self.queue.len(), points: points.len() });
                }
                // From rest after a hold; after a line the arm may be moving along it, which the
                // way begins with.
                let at = |t: f64, x: Vec3| Waypoint { t, x, ..Waypoint::default() };
                let (head, from_rest) = match self.start {
                    SegmentStart::AtRest(last) => (vec![at(0.0, last)], true),
                    SegmentStart::Moving { from, to, dt_s } => (vec![at(-dt_s, from), at(0.0, to)], false),
                    SegmentStart::Hold(n) => match self.withdrawals.done_at(n) {
                        Some(_) => {
                            (vec![at(0.0, self.withdrawals.held_at(n).ok_or(SegmentError::NothingHeld(n))?)], true)
                        }
                        None => return Err(SegmentError::HoldNotMade(n)),
                    },
                };
                let last = head.len() - 1;
                let samples = segment_after(&points, &head[last].x, &self.robot)?;
                let way: Vec<Waypoint> = head.into_iter().chain(samples.iter().copied()).collect();
                // Its way from where what is queued ends (the line before it was checked with
                // what it ends); no client aims a segment at where the arm is seen.
                let start = PathStart::AtTheReference { seen: None };
                self.bounds.check_path(&self.robot, &way[last..], start).map_err(SegmentError::Bounds)?;
                // Its end is not taken as a stop: the next segment may go on from it.
                self.bounds.check_motion(&self.robot, &way, (from_rest, false)).map_err(SegmentError::Bounds)?;
                self.queue.push_back(FeedItem::Segment);
                self.queue_samples(samples);
                self.start = SegmentStart::after(&way);
            }
            FeedRequest::Follow { trajectory, withdrawal } => {
                self.withdrawn(withdrawal);
                let waypoints = trajectory.waypoints();
                let start = waypoints[0].t;
                // The first waypoint is where the arm holds (admitted within the tolerance), so
                // the hold stands for it.
                self.queue_samples(waypoints[1..].iter().map(|w| Waypoint { t: w.t - start, ..*w }));
                self.start = SegmentStart::after(waypoints);
            }
            FeedRequest::Hold { withdrawal } => self.hold(withdrawal),
        }
        Ok(())
    }

    /// Withdraws what is queued; the next segment starts where the loop holds for it.
    fn hold(&mut self, withdrawal: u64) {
        self.withdrawn(withdrawal);
        self.start = SegmentStart::Hold(withdrawal);
    }

    fn withdrawn(&mut self, withdrawal: u64) {
        self.queue.clear();
        self.queue.push_back(FeedItem::Withdrawn(withdrawal));
    }

    fn queue_samples(&mut self, samples: impl IntoIterator<Item = Waypoint>) {
        self.queue.extend(samples.into_iter().map(FeedItem::Sample));
    }
}

/// How long the feeding thread waits for a request while the loop's feed is full.
const FULL_FEED_WAIT: Duration = Duration::from_millis(5);
/// How long a segment waits for the loop to make the hold it starts from, and how often it
/// looks.
const HOLD_WAIT: Duration = Duration::from_millis(100);
const HOLD_POLL: Duration = Duration::from_millis(1);
/// How long it waits for a request with nothing to feed, between looks at its stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Runs `feeder` on the calling thread until the loop goes away or `stop` is set: items go into
/// `feed` as it has room, and requests are taken as they come, also while the feed is full (a
/// goal must not wait behind the samples it replaces). Refused segments are logged. Hands the
/// feeder and its requests back for the next loop.
pub fn run_feeder(
    mut feeder: Feeder,
    requests: RequestQueue,
    feed: SyncSender<FeedItem>,
    stop: &AtomicBool,
) -> (Feeder, RequestQueue) {
    // Acquire: the loop, which finds the feed ended after this sees the stop, sees it as well.
    while !stop.load(Ordering::Acquire) {
        let request = match feeder.front() {
            Some(&item) => match feed.try_send(item) {
                Ok(()) => {
                    feeder.sent();
                    requests.try_recv().ok()
                }
                Err(TrySendError::Full(_)) => match requests.recv_timeout(FULL_FEED_WAIT) {
                    Ok(request) => Some(request),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(FULL_FEED_WAIT);
                        None
                    }
                },
                Err(TrySendError::Disconnected(_)) => break,
            },
            None => match requests.recv_timeout(IDLE_WAIT) {
                Ok(request) => Some(request),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            },
        };
        if let Some(request) = request {
            let segment = matches!(request, FeedRequest::Append(_));
            // A segment right after a hold starts where the loop holds: it says so within a
            // cycle or two of its own (it makes withdrawals without waiting for the feed).
            let asked = std::time::Instant::now();
            while segment && feeder.awaits_hold() && asked.elapsed() < HOLD_WAIT && !stop.load(Ordering::Relaxed) {
                std::thread::sleep(HOLD_POLL);
            }
            match feeder.request(request) {
                Ok(()) if segment => log::info!("~/trajectory: segment queued"),
                Ok(()) => {}
                Err(error) => log::error!("~/trajectory segment refused: {error}"),
            }
        }
    }
    (feeder, requests)
}

//! What feeds the loop's ring buffer: samples in order through a bounded channel, and
//! withdrawals beside it.
//!
//! A withdrawal cannot travel in the channel: the samples it withdraws may fill the channel and
//! the ring, and the loop takes from the channel only as the ring has room. So the feeder counts
//! it in [`Withdrawals`], which the loop reads every cycle, and marks in the channel where the
//! withdrawn samples end ([`FeedItem::Withdrawn`]); the loop drops what comes before the mark.
//! A continuing withdrawal ([`Withdrawals::request_continuing`], a command stream's next move)
//! leaves what the ring holds playing until the mark, and what follows it takes over from there.
//! The loop's end of all this is its [`Intake`].

use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, TryRecvError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::ring::{RingError, TrajectoryRing};
use crate::control::{Trajectory, Waypoint};
use crate::model::math::Vec3;

/// The latest a continuing withdrawal's move is joined after it was due to start [s]. Later (a
/// feeder stalled that long), it is joined that far in, and the loop's reference steps by how far the
/// move and the one before it have parted by then.
const MAX_REPLACEMENT_LATE_S: f64 = 0.02;

/// Samples in flight between a feeder and the loop.
pub const FEED_DEPTH: usize = 256;

/// How often a loop waiting for its first sample looks whether it was asked to stop.
const STOP_POLL: Duration = Duration::from_millis(10);

/// What feeds the ring buffer, in order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FeedItem {
    /// A sample at its trajectory time [s], or within a segment, at its time from the
    /// segment's start.
    Sample(Waypoint),
    /// The samples that follow form a segment, which starts at the end of what the loop holds,
    /// or when the loop takes it if the arm has got there already (it holds until then).
    Segment,
    /// The samples of withdrawal `n` ([`Withdrawals::request`]) end here: what follows counts
    /// from the moment the loop withdrew them.
    Withdrawn(u64),
    /// No more samples: the run ends after the last one.
    End,
}

/// Withdrawals asked of a loop, and when the loop made them. Shared between a feeder and the
/// loop it feeds; the loop only reads and stores atomics, and never waits.
#[derive(Debug, Default)]
pub struct Withdrawals {
    requested: AtomicU64,
    /// The newest withdrawal asked for as continuing, and when the move after it starts
    /// [ns, the monotonic clock].
    continuing: AtomicU64,
    continuing_from_ns: AtomicU64,
    /// Odd while the loop writes what it did (a sequence lock): the loop can make two
    /// withdrawals in one cycle, and a reader must not take the time or the axes of one with
    /// those of the other.
    version: AtomicU64,
    done: AtomicU64,
    /// Trajectory time of the last withdrawal done [s], as f64 bits.
    done_at: AtomicU64,
    /// Where the loop held the platform for it [m], as f64 bits; NaN where it held nothing (its
    /// trajectory had ended).
    held_at: [AtomicU64; 3],
}

impl Withdrawals {
    /// Asks the loop to withdraw every sample it has not reached and hold where it is; returns
    /// the withdrawal's number, which the feeder then sends as [`FeedItem::Withdrawn`].
    pub fn request(&self) -> u64 {
        self.requested.fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Asks the loop to withdraw every sample it has not reached once the samples that follow
    /// the withdrawal's mark come, going on with what it has until then, and with them from
    /// where its reference is then, as it moves (a command stream's next move, planned on from
    /// the one before, whose time 0 is `starts_ns` on the monotonic clock,
    /// [`crate::hil::realtime::monotonic_ns`]: the loop takes it up at the time it has reached
    /// by then, not from its start). Returns the withdrawal's number. A loop that sees the
    /// withdrawal before it is marked continuing makes it as [`Withdrawals::request`] does: it
    /// holds.
    pub fn request_continuing(&self, starts_ns: u64) -> u64 {
        // Marked continuing before it is asked for: a loop that sees it asked sees it continue.
        // (One thread asks for withdrawals, under the node's commands' lock.)
        let n = self.requested.load(Ordering::Acquire) + 1;
        self.continuing_from_ns.store(starts_ns, Ordering::Release);
        self.continuing.fetch_max(n, Ordering::AcqRel);
        self.request()
    }

    /// When the move after withdrawal `n` starts [ns, the monotonic clock], if `n` was asked
    /// for as continuing (the loop's side).
    pub fn continues(&self, n: u64) -> Option<u64> {
        (self.continuing.load(Ordering::Acquire) == n).then(|| self.continuing_from_ns.load(Ordering::Acquire))
    }

    /// The newest withdrawal asked for, if the loop has not made it yet (the loop's side).
    pub fn pending(&self) -> Option<u64> {
        let requested = self.requested.load(Ordering::Acquire);
        (requested != self.done.load(Ordering::Relaxed)).then_some(requested)
    }

    /// The loop made withdrawal `n` at trajectory time `t` [s], holding the platform at `held`
    /// [m] if anywhere (the loop's side).
    pub fn done(&self, n: u64, t: f64, held: Option<Vec3>) {
        // One writer: the loop.
        let version = self.version.load(Ordering::Relaxed);
        self.version.store(version + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.done_at.store(t.to_bits(), Ordering::Relaxed);
        let held = held.unwrap_or(Vec3::repeat(f64::NAN));
        for (slot, value) in self.held_at.iter().zip(held.iter()) {
            slot.store(value.to_bits(), Ordering::Relaxed);
        }
        self.done.store(n, Ordering::Relaxed);
        self.version.store(version + 2, Ordering::Release);
    }

    /// The last withdrawal done, when [s] and where it held [m], read whole: a reader that
    /// meets the loop writing tries again (the loop's write is a few stores).
    fn last_done(&self) -> (u64, f64, Vec3) {
        loop {
            let before = self.version.load(Ordering::Acquire);
            if before % 2 == 0 {
                let n = self.done.load(Ordering::Relaxed);
                let t = f64::from_bits(self.done_at.load(Ordering::Relaxed));
                let held = Vec3::from_fn(|axis, _| f64::from_bits(self.held_at[axis].load(Ordering::Relaxed)));
                fence(Ordering::Acquire);
                if self.version.load(Ordering::Relaxed) == before {
                    return (n, t, held);
                }
            }
            std::thread::yield_now();
        }
    }

    /// Where the loop held the platform for withdrawal `n` [m]; None until it has made it, or
    /// if it held nothing. After a later withdrawal, where it held for that one.
    pub fn held_at(&self, n: u64) -> Option<Vec3> {
        let (done, _, held) = self.last_done();
        (done >= n && held.iter().all(|value| value.is_finite())).then_some(held)
    }

    /// When the loop made withdrawal `n` [s, trajectory time]; None until it has. After a
    /// later withdrawal, the time of that one.
    pub fn done_at(&self, n: u64) -> Option<f64> {
        let (done, t, _) = self.last_done();
        (done >= n).then_some(t)
    }
}

/// Feeds a validated trajectory to a loop from a thread of its own; the returned receiver
/// is the loop's feed. Samples wait in a bounded channel until the ring has room.
pub fn feed_trajectory(trajectory: Arc<Trajectory>) -> Receiver<FeedItem> {
    let (feed, samples) = sync_channel(FEED_DEPTH);
    std::thread::spawn(move || {
        for &sample in trajectory.waypoints() {
            if feed.send(FeedItem::Sample(sample)).is_err() {
                return;
            }
        }
        let _ = feed.send(FeedItem::End);
    });
    samples
}

/// The loop's end of its feed: it makes the withdrawals asked of it ([`Intake::withdraw`], at the
/// start of a cycle) and moves samples into the ring as it has room ([`Intake::fill`]).
#[derive(Debug)]
pub struct Intake {
    feed: Receiver<FeedItem>,
    withdrawals: Option<Arc<Withdrawals>>,
    /// The withdrawal whose samples are still being dropped, and, where it continues (the
    /// ring plays on until its mark, and is replaced from there), when the move after it
    /// starts [ns, the monotonic clock].
    dropping_until: Option<(u64, Option<u64>)>,
    /// The feed's end has come: its feeder may be gone, as it should be, by the next fill.
    ended: bool,
}

impl Intake {
    /// Takes from `feed`.
    pub fn new(feed: Receiver<FeedItem>) -> Intake {
        Intake { feed, withdrawals: None, dropping_until: None, ended: false }
    }

    /// Makes the withdrawals `withdrawals` asks for.
    pub fn with_withdrawals(mut self, withdrawals: Arc<Withdrawals>) -> Intake {
        self.withdrawals = Some(withdrawals);
        self
    }

    /// Waits up to `timeout` for the first sample, or until `asked_to_stop` (looked at every
    /// [`STOP_POLL`]): the run starts at its time. Marks before it have nothing to act on.
    pub fn first_sample(&self, timeout: Duration, asked_to_stop: impl Fn() -> bool) -> Option<Waypoint> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.feed.recv_timeout(left.min(STOP_POLL)) {
                Ok(FeedItem::Sample(first)) => return Some(first),
                Ok(FeedItem::Segment | FeedItem::Withdrawn(_)) => {}
                Ok(FeedItem::End) | Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) if left.is_zero() || asked_to_stop() => return None,
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// Makes the newest withdrawal asked for, if any, at trajectory time `now` [s].
    pub fn withdraw(&mut self, ring: &mut TrajectoryRing, now: f64) {
        let Some(withdrawals) = &self.withdrawals else { return };
        if let Some(n) = withdrawals.pending() {
            let continuing = withdrawals.continues(n);
            let held = match continuing {
                Some(_) => ring.current(now).map(|reference| reference.x),
                None => ring.withdraw(now),
            };
            withdrawals.done(n, now, held);
            self.dropping_until = Some((n, continuing));
        }
    }

    /// Moves samples from the feed into the ring while it has room, dropping those a
    /// withdrawal took back. `now` [s] is the trajectory time, when a segment starts, and
    /// `now_ns` the cycle's time on the monotonic clock.
    pub fn fill(&mut self, ring: &mut TrajectoryRing, now: f64, now_ns: u64) -> Result<(), RingError> {
        while !self.ended && (self.dropping_until.is_some() || ring.free() > 0) {
            let item = match self.feed.try_recv() {
                Ok(item) => item,
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    self.lost(ring, now);
                    break;
                }
            };
            match item {
                FeedItem::End => {
                    self.end(ring, now);
                    break;
                }
                FeedItem::Withdrawn(marked) => self.reach_mark(ring, marked, now, now_ns),
                // Withdrawn: the mark after them is still to come.
                FeedItem::Sample(_) | FeedItem::Segment if self.dropping_until.is_some() => {}
                FeedItem::Sample(sample) => ring.push(sample)?,
                FeedItem::Segment => ring.begin_segment(now)?,
            }
        }
        Ok(())
    }

    /// The feed has ended: the ring plays out what it holds, but where a continuing withdrawal
    /// waits for a successor that will not come, the move it overtook ends where it is now (and
    /// with it the run, which stops the motors), rather than playing on to its end.
    fn end(&mut self, ring: &mut TrajectoryRing, now: f64) {
        if self.dropping_until.take().is_some_and(|(_, continuing)| continuing.is_some()) {
            ring.withdraw(now);
        }
        ring.close();
        self.ended = true;
    }

    /// The feed went away without its end (its feeder stopped, as hil_node's does, or its
    /// thread is gone): what the ring still holds came from a feeder no longer there, so the run
    /// ends at rest where the loop's reference is now, and stops the motors, rather than playing
    /// that out.
    fn lost(&mut self, ring: &mut TrajectoryRing, now: f64) {
        self.dropping_until = None;
        ring.withdraw(now);
        self.end(ring, now);
    }

    /// The feed has reached the mark of withdrawal `marked`. The mark can come before the loop
    /// has seen its withdrawal asked for (asked between this cycle's [`Intake::withdraw`] and its
    /// fill): the withdrawal is made now, as it would have been at the start of the cycle, and
    /// never are the samples after a mark taken as if they went on from those before it. A mark
    /// of a withdrawal that a newer one overtook is passed.
    fn reach_mark(&mut self, ring: &mut TrajectoryRing, marked: u64, now: f64, now_ns: u64) {
        if self.dropping_until.is_none_or(|(n, _)| n < marked) {
            self.withdraw(ring, now);
        }
        let Some((n, continuing)) = self.dropping_until else { return };
        if n != marked {
            return;
        }
        self.dropping_until = None;
        if let Some(starts_ns) = continuing {
            // A move that comes later than it was due to start is joined where it is by now:
            // its way from its start is the one before's, on which it was planned. One that
            // comes early starts when it was due.
            let late_s = ((now_ns as f64 - starts_ns as f64) * 1e-9).min(MAX_REPLACEMENT_LATE_S);
            ring.replace_from(now, late_s);
        }
    }
}

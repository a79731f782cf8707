//! The trajectory ring buffer of the HIL loop (docs/hil.md): a fixed number of
//! samples, linearly interpolated on demand, refilled while the loop runs.
//!
//! Samples arrive with trajectory times, or in segments timed from the segment's start: only
//! the loop knows the present, so only the ring can start a segment at "the end of what is
//! queued, or now if the arm has got there already", and withdraw what has not been reached.

use std::collections::VecDeque;

use crate::control::{Reference, Waypoint};
use crate::model::math::Vec3;

/// Samples the lab's original HIL controller keeps (docs/hil.md).
pub const RING_CAPACITY: usize = 2000;

/// Why a sample was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RingError {
    #[error("the ring buffer is full ({0} samples)")]
    Full(usize),
    #[error("the sample at t = {t} s has a value that is not finite")]
    NonFinite { t: f64 },
    #[error("the sample at t = {t} s is not after the previous one at {previous_t} s")]
    TimeNotIncreasing { t: f64, previous_t: f64 },
    #[error("no more samples are accepted: the trajectory was closed")]
    Closed,
}

/// What the ring gives for an instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RingSample {
    /// A reference sample, interpolated between the samples around the instant.
    Reference(Reference),
    /// The instant is past the last sample and more are expected: hold the last position.
    Starved(Reference),
    /// The instant is past the last sample of a closed trajectory.
    Ended,
    /// No sample has arrived yet.
    Empty,
}

/// A bounded buffer of trajectory samples in time order. Memory is reserved once; nothing is
/// allocated after construction.
#[derive(Debug, Clone)]
pub struct TrajectoryRing {
    samples: VecDeque<Waypoint>,
    capacity: usize,
    low_water: usize,
    last_t: Option<f64>,
    closed: bool,
    /// Added to the time of each sample pushed: the start of the current segment [s].
    segment_start: f64,
    /// Samples pushed at or before this time [s] are dropped: a replacement taken up late has
    /// passed them ([`TrajectoryRing::replace_from`]).
    passed: f64,
}

impl TrajectoryRing {
    /// A ring of `capacity` samples that reports low water below `low_water` samples ahead.
    pub fn new(capacity: usize, low_water: usize) -> TrajectoryRing {
        TrajectoryRing {
            samples: VecDeque::with_capacity(capacity),
            capacity,
            low_water,
            last_t: None,
            closed: false,
            segment_start: 0.0,
            passed: f64::NEG_INFINITY,
        }
    }

    /// Appends a sample after the last one. Its time counts from the start of the current
    /// segment, if one was begun ([`TrajectoryRing::begin_segment`]).
    pub fn push(&mut self, sample: Waypoint) -> Result<(), RingError> {
        let t = sample.t + self.segment_start;
        if t <= self.passed {
            return Ok(());
        }
        self.push_at_trajectory_time(Waypoint { t, ..sample })
    }

    fn push_at_trajectory_time(&mut self, sample: Waypoint) -> Result<(), RingError> {
        if self.closed {
            return Err(RingError::Closed);
        }
        if self.samples.len() == self.capacity {
            return Err(RingError::Full(self.capacity));
        }
        let finite =
            sample.t.is_finite() && [sample.x, sample.xd, sample.xdd].iter().all(|v| v.iter().all(|c| c.is_finite()));
        if !finite {
            return Err(RingError::NonFinite { t: sample.t });
        }
        if let Some(previous_t) = self.last_t {
            if !(sample.t > previous_t) {
                return Err(RingError::TimeNotIncreasing { t: sample.t, previous_t });
            }
        }
        self.last_t = Some(sample.t);
        self.samples.push_back(sample);
        Ok(())
    }

    /// Starts a segment at `now` [s] or at the last sample, whichever is later: the samples
    /// pushed next count their times from there. When the loop has passed the last sample, the
    /// arm holds there until `now`, so the segment starts from rest rather than in the past.
    pub fn begin_segment(&mut self, now: f64) -> Result<(), RingError> {
        match (self.samples.back(), self.last_t) {
            (Some(last), Some(last_t)) if now > last_t => {
                let x = last.x;
                self.hold_from(now, x)?;
                self.segment_start = now;
            }
            (_, Some(last_t)) => self.segment_start = last_t,
            (_, None) => self.segment_start = now,
        }
        Ok(())
    }

    /// Appends a sample at rest at `x` [m] at trajectory time `t` [s].
    fn hold_from(&mut self, t: f64, x: Vec3) -> Result<(), RingError> {
        self.push_at_trajectory_time(Waypoint { t, x, ..Waypoint::default() })
    }

    /// Withdraws every sample after `now` [s] and holds at the position it gave for `now` (at
    /// rest) from there: the samples that follow form a new segment starting at `now`. A closed
    /// trajectory takes no more samples, so withdrawing ends it. Returns where it holds [m].
    pub fn withdraw(&mut self, now: f64) -> Option<Vec3> {
        let x = self.current(now).map(|reference| reference.x);
        self.samples.clear();
        self.last_t = None;
        (self.segment_start, self.passed) = (now, f64::NEG_INFINITY);
        let held = x.filter(|_| !self.closed)?;
        // Cannot fail: the ring is empty and open, and its reference came from finite samples.
        let _ = self.hold_from(now, held);
        Some(held)
    }

    /// Replaces every sample after `now` [s] with those pushed next, which count their times
    /// from `late_s` [s] before `now` (the move was due to start then; its samples up to `now`
    /// are dropped): the controller's reference goes on from where, and as fast as, it is at `now` (a
    /// command stream's next move), where [`TrajectoryRing::withdraw`] holds at rest. A closed
    /// trajectory takes no more samples, so replacing ends it. Returns where the controller's reference is
    /// [m].
    pub fn replace_from(&mut self, now: f64, late_s: f64) -> Option<Vec3> {
        let current = self.current(now);
        self.samples.clear();
        self.last_t = None;
        (self.segment_start, self.passed) = (now - late_s, now);
        let current = current.filter(|_| !self.closed)?;
        // Cannot fail: the ring is empty and open, and its reference came from finite samples.
        let _ = self.push_at_trajectory_time(Waypoint { t: now, x: current.x, xd: current.xd, xdd: current.xdd });
        Some(current.x)
    }

    /// The controller's reference at `now` [s], where the ring gives one (it has samples, and
    /// has not ended).
    pub fn current(&mut self, now: f64) -> Option<Reference> {
        match self.sample(now) {
            RingSample::Reference(reference) | RingSample::Starved(reference) => Some(reference),
            RingSample::Ended | RingSample::Empty => None,
        }
    }

    /// Marks the trajectory complete: once past its last sample the ring reports the end.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Room for more samples.
    pub fn free(&self) -> usize {
        self.capacity - self.samples.len()
    }

    /// Samples held, including the one before the current instant.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// True while more samples are expected and fewer than the low-water mark are held.
    pub fn is_low(&self) -> bool {
        !self.closed && self.samples.len() < self.low_water
    }

    /// Time of the first sample held [s].
    pub fn first_time(&self) -> Option<f64> {
        self.samples.front().map(|sample| sample.t)
    }

    /// Its reference sample at `t` [s], linearly interpolated; samples before the one preceding `t` are
    /// dropped, so time must not go backwards.
    pub fn sample(&mut self, t: f64) -> RingSample {
        while self.samples.len() >= 2 && self.samples[1].t <= t {
            self.samples.pop_front();
        }
        let hold = |sample: &Waypoint| Reference { x: sample.x, ..Reference::default() };
        match (self.samples.front(), self.samples.get(1)) {
            (None, _) if self.closed => RingSample::Ended,
            (None, _) => RingSample::Empty,
            (Some(first), _) if t < first.t => RingSample::Reference(hold(first)),
            (Some(start), Some(end)) => {
                let s = (t - start.t) / (end.t - start.t);
                RingSample::Reference(Reference {
                    x: start.x.lerp(&end.x, s),
                    xd: start.xd.lerp(&end.xd, s),
                    xdd: start.xdd.lerp(&end.xdd, s),
                })
            }
            (Some(last), None) if self.closed && t > last.t => RingSample::Ended,
            (Some(last), None) if self.closed => RingSample::Reference(hold(last)),
            (Some(last), None) => RingSample::Starved(hold(last)),
        }
    }
}

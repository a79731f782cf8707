//! The HIL loop's intake: withdrawals and their marks, however the loop's look at the
//! withdrawals, its fill and the feeder's requests and marks interleave (docs/hil.md,
//! docs/safety.md).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use arm_hil::control::Waypoint;
use arm_hil::hil::{FeedItem, Intake, RingError, RingSample, TrajectoryRing, Withdrawals, RING_CAPACITY};
use arm_hil::model::math::Vec3;
use proptest::prelude::*;

/// The loop's cycle [s].
const PERIOD_S: f64 = 0.001;
/// A move's samples are this far apart [s].
const SAMPLE_S: f64 = 0.004;

/// A sample `k` steps of a move along `axis` (10 um a step), at rest.
fn step_along(axis: usize, k: u16) -> Waypoint {
    let mut x = Vec3::new(0.0, 0.0, 0.2);
    x[axis] += f64::from(k) * 1e-5;
    Waypoint { t: f64::from(k) * SAMPLE_S, x, ..Waypoint::default() }
}

/// A loop's intake and a ring of `capacity` samples at trajectory time 0, fed a move along x of
/// 2 s (what does not fit waits in the feed), and the feeder's ends: the feed and the
/// withdrawals.
struct Loop {
    ring: TrajectoryRing,
    intake: Intake,
    feed: Sender<FeedItem>,
    withdrawals: Arc<Withdrawals>,
    now: f64,
}

impl Loop {
    fn new(capacity: usize) -> Loop {
        let (feed, items) = channel();
        let withdrawals = Arc::new(Withdrawals::default());
        let intake = Intake::new(items).with_withdrawals(withdrawals.clone());
        let mut ring = TrajectoryRing::new(capacity, capacity / 4);
        ring.push(step_along(0, 0)).unwrap();
        for k in 1..=500 {
            feed.send(FeedItem::Sample(step_along(0, k))).unwrap();
        }
        let mut fed = Loop { ring, intake, feed, withdrawals, now: 0.0 };
        fed.fill().unwrap();
        fed
    }

    fn now_ns(&self) -> u64 {
        (self.now * 1e9) as u64
    }

    /// The loop's look at the withdrawals asked for, `after_s` after its last cycle.
    fn look(&mut self, after_s: f64) {
        self.now += after_s;
        self.intake.withdraw(&mut self.ring, self.now);
    }

    /// The loop's fill, in the cycle of its last look.
    fn fill(&mut self) -> Result<(), RingError> {
        let now_ns = self.now_ns();
        self.intake.fill(&mut self.ring, self.now, now_ns)
    }

    /// One cycle: look, fill, and the ring sampled.
    fn cycle(&mut self, after_s: f64) -> Result<RingSample, RingError> {
        self.look(after_s);
        self.fill()?;
        Ok(self.ring.sample(self.now))
    }

    /// The feeder asks for a withdrawal: continuing from the loop's present, or holding.
    fn ask(&self, continuing: bool) -> u64 {
        match continuing {
            true => self.withdrawals.request_continuing(self.now_ns()),
            false => self.withdrawals.request(),
        }
    }

    /// The feeder's mark of withdrawal `n`, and the `samples` samples of the move after it, along y.
    fn mark(&self, n: u64, samples: u16) {
        self.feed.send(FeedItem::Withdrawn(n)).unwrap();
        for k in 1..=samples {
            self.feed.send(FeedItem::Sample(step_along(1, k))).unwrap();
        }
    }

    fn reference_x(&mut self) -> Vec3 {
        match self.ring.sample(self.now) {
            RingSample::Reference(reference) | RingSample::Starved(reference) => reference.x,
            other => panic!("no reference at {} s: {other:?}", self.now),
        }
    }
}

/// A loaded machine: the loop looks at the withdrawals, 1 s into the first move, then a move
/// takes the arm (`continuing` or holding) and the feeder marks its withdrawal and queues the
/// move's samples, then the loop takes in the feed in the same cycle. The move's samples count
/// from the withdrawal, not from the move before, whose end (2 s) is later than their times would
/// be on it: made at the mark's cycle, and 0.1 s on the loop is 0.1 s into the move. The loop,
/// the withdrawal, and where the loop's reference was when it was made.
fn a_move_marked_within_a_cycle(continuing: bool) -> (Loop, u64, Vec3) {
    let mut rig = Loop::new(RING_CAPACITY);
    rig.cycle(1.0).unwrap();
    let before = rig.reference_x();
    rig.look(0.0);
    let n = rig.ask(continuing);
    rig.mark(n, 50);
    rig.fill().expect("the move's samples follow its withdrawal");
    assert_eq!(rig.withdrawals.done_at(n), Some(rig.now), "made at the mark's cycle");
    rig.cycle(0.1).unwrap();
    assert!((rig.reference_x() - step_along(1, 25).x).norm() < 1e-12, "0.1 s into the move");
    (rig, n, before)
}

#[test]
fn a_mark_that_comes_before_the_loop_saw_its_withdrawal_withdraws_there() {
    let (rig, n, before) = a_move_marked_within_a_cycle(false);
    assert_eq!(rig.withdrawals.held_at(n), Some(before), "holding where the reference was");
}

#[test]
fn a_continuing_mark_that_comes_before_the_loop_saw_its_withdrawal_replaces_from_there() {
    a_move_marked_within_a_cycle(true);
}

#[test]
fn a_feed_that_ends_before_a_continuing_moves_successor_holds_where_it_is() {
    let mut rig = Loop::new(RING_CAPACITY);
    rig.cycle(1.0).unwrap();
    rig.ask(true);
    rig.cycle(PERIOD_S).unwrap();
    rig.feed.send(FeedItem::End).unwrap();
    rig.cycle(PERIOD_S).unwrap();
    // The first move goes 10 um each 4 ms: 2.5 mm a second.
    assert!((rig.reference_x() - Vec3::new(rig.now * 2.5e-3, 0.0, 0.2)).norm() < 1e-12, "where the move was");
    assert_eq!(rig.cycle(0.5), Ok(RingSample::Ended), "the move overtaken does not play on to its end at 2 s");
}

#[test]
fn a_feed_that_goes_away_without_its_end_holds_where_the_reference_is_and_ends_the_run() {
    let Loop { mut ring, mut intake, feed, .. } = Loop::new(RING_CAPACITY);
    drop(feed);
    let now = 1.0;
    intake.fill(&mut ring, now, 0).unwrap();
    match ring.sample(now) {
        RingSample::Reference(held) => assert!((held.x - step_along(0, 250).x).norm() < 1e-12, "1 s into the move"),
        other => panic!("no hold where the reference was: {other:?}"),
    }
    assert_eq!(ring.sample(now + PERIOD_S), RingSample::Ended, "the move's second left in the ring is not played");
}

/// The loop's withdrawals read whole while the loop makes them: never the axes of one hold with
/// those of another (the loop can make two in one cycle).
#[test]
fn what_the_loop_did_is_read_whole_while_it_writes() {
    let withdrawals = Arc::new(Withdrawals::default());
    let read_enough = Arc::new(AtomicBool::new(false));
    let (writer, stop) = (withdrawals.clone(), read_enough.clone());
    // The loop writes until the reader has seen enough: however the two threads are scheduled.
    let writing = std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            writer.done(n, n as f64, Some(Vec3::new(n as f64, -(n as f64), 2.0 * n as f64)));
        }
    });
    // Until 1 000 different holds are seen: reads made while the writer ran.
    let (mut changes, mut last) = (0u64, f64::NAN);
    while changes < 1_000 && !writing.is_finished() {
        if let Some(held) = withdrawals.held_at(1) {
            assert!(held.y == -held.x && held.z == 2.0 * held.x, "a torn read: {held}");
            changes += u64::from(held.x != last);
            last = held.x;
        }
    }
    read_enough.store(true, Ordering::Relaxed);
    writing.join().unwrap();
    assert_eq!(changes, 1_000, "the holds seen changing while the loop wrote");
}

/// What the loop and the feeder do next, in any order. The loop looks at the withdrawals and
/// fills its ring by turns; the feeder asks for withdrawals and marks them later, in order, a
/// mark not yet sent replaced by a newer one's (as the feeder's queue drops it), and queues each
/// move's samples after its mark.
#[derive(Debug, Clone)]
enum Step {
    /// The loop's next half cycle: a look this many milliseconds after the last cycle, or the
    /// fill after a look.
    Loop(u8),
    /// The feeder asks for a withdrawal.
    Ask { continuing: bool },
    /// The feeder marks the oldest withdrawals it asked for and has not marked, `overtaken` more
    /// than one where it has them, sending only the newest's mark.
    Mark { overtaken: u8 },
    /// The feeder queues this many more samples of the move after the last mark.
    Samples(u16),
    /// The feeder queues a segment after what it queued: this many samples along z.
    Segment(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..50).prop_map(Step::Loop),
        any::<bool>().prop_map(|continuing| Step::Ask { continuing }),
        (0u8..3).prop_map(|overtaken| Step::Mark { overtaken }),
        (1u16..100).prop_map(Step::Samples),
        (1u16..100).prop_map(Step::Segment),
    ]
}

/// Where the feeder's queue ends: the samples of a move (after withdrawal `n`, `sent` so far)
/// or a segment (the `index`-th, `sent` so far). Each starts 1 mm apart from the others along x,
/// so that where the loop ends says which it followed.
#[derive(Debug, Clone, Copy)]
enum Queued {
    Move { n: u64, continuing: bool, sent: u16 },
    Segment { index: u16, sent: u16 },
}

impl Queued {
    fn sample(&self, k: u16) -> Waypoint {
        let (axis, offset) = match *self {
            Queued::Move { n, .. } => (1, n as f64),
            Queued::Segment { index, .. } => (2, 1000.0 + f64::from(index)),
        };
        let mut sample = step_along(axis, k);
        sample.x[0] += offset * 1e-3;
        sample
    }

    /// Queues `count` more samples; the position of the last queued.
    fn send(&mut self, rig: &Loop, count: u16) -> Vec3 {
        let sent = match self {
            Queued::Move { sent, .. } | Queued::Segment { sent, .. } => sent,
        };
        let from = *sent;
        *sent += count;
        let to = *sent;
        for k in from + 1..=to {
            rig.feed.send(FeedItem::Sample(self.sample(k))).unwrap();
        }
        self.sample(to).x
    }
}

proptest! {
    /// However the feeder's requests, marks and samples and the loop's looks and fills
    /// interleave, with the old move still waiting in the feed, every sample is taken (none comes
    /// earlier than the one before it: that would stop the motors), every withdrawal asked for
    /// is made, and once the feed is taken in the loop ends where the last queued ends: the
    /// newest move, or the segments after it.
    #[test]
    fn every_interleaving_of_withdrawals_marks_and_cycles_is_taken_in(
        steps in proptest::collection::vec(step(), 1..80),
        capacity in prop_oneof![Just(16usize), Just(RING_CAPACITY)],
    ) {
        let mut rig = Loop::new(capacity);
        let mut looked = false;
        let mut unmarked: VecDeque<(u64, bool)> = VecDeque::new();
        let (mut queued, mut segments) = (None::<Queued>, 0u16);
        let mut end = step_along(0, 500).x;
        let mut last_asked = None;
        for step in steps {
            match step {
                Step::Loop(after_ms) if !looked => {
                    rig.look(f64::from(after_ms) * PERIOD_S);
                    looked = true;
                }
                Step::Loop(_) => {
                    rig.fill().expect("a fill takes its feed in");
                    looked = false;
                }
                Step::Ask { continuing } => {
                    let n = rig.ask(continuing);
                    unmarked.push_back((n, continuing));
                    last_asked = Some(n);
                }
                Step::Mark { overtaken } => {
                    let marked = unmarked.drain(..unmarked.len().min(usize::from(overtaken) + 1)).next_back();
                    if let Some((n, continuing)) = marked {
                        rig.feed.send(FeedItem::Withdrawn(n)).unwrap();
                        queued = Some(Queued::Move { n, continuing, sent: 0 });
                    }
                }
                Step::Samples(count) => {
                    if let Some(queued) = &mut queued {
                        end = queued.send(&rig, count);
                    }
                }
                Step::Segment(count) => {
                    rig.feed.send(FeedItem::Segment).unwrap();
                    segments += 1;
                    let mut segment = Queued::Segment { index: segments, sent: 0 };
                    end = segment.send(&rig, count);
                    queued = Some(segment);
                }
            }
        }
        if looked {
            rig.fill().expect("a fill takes its feed in");
        }
        if let Some((n, continuing)) = unmarked.pop_back() {
            rig.feed.send(FeedItem::Withdrawn(n)).unwrap();
            queued = Some(Queued::Move { n, continuing, sent: 0 });
        }
        // A continuing move is joined up to 20 ms late, its samples until then passed: one of
        // 40 ms or more keeps its end. A move with no sample holds where the loop was.
        let short = match queued {
            Some(Queued::Move { continuing: true, sent, .. }) => 10u16.saturating_sub(sent),
            Some(Queued::Move { sent: 0, .. }) => 1,
            _ => 0,
        };
        if let (Some(queued), 1..) = (&mut queued, short) {
            end = queued.send(&rig, short);
        }
        // Long enough for whatever is queued: the first move's 2 s and each later one's.
        for _ in 0..40_000 {
            rig.cycle(PERIOD_S).expect("a cycle takes its feed in");
        }
        prop_assert_eq!(rig.withdrawals.pending(), None, "a withdrawal asked for was not made");
        if let Some(n) = last_asked {
            prop_assert!(rig.withdrawals.done_at(n).is_some(), "the newest withdrawal was made");
        }
        prop_assert!((rig.reference_x() - end).norm() < 1e-12, "ends at {}, not at {}", rig.reference_x(), end);
    }
}

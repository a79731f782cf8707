//! The HIL loop's intake: withdrawals and their marks, however the loop's look at the
//! withdrawals and the feeder's marks interleave (docs/hil.md, docs/safety.md).

use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;

use arm_hil::control::Waypoint;
use arm_hil::hil::{FeedItem, Intake, RingSample, TrajectoryRing, Withdrawals, RING_CAPACITY};
use arm_hil::model::math::Vec3;
use proptest::prelude::*;

/// The loop's cycle [s].
const PERIOD_S: f64 = 0.001;

fn at(t: f64, x: f64) -> Waypoint {
    Waypoint { t, x: Vec3::new(x, 0.0, 0.2), ..Waypoint::default() }
}

/// A loop's intake and ring at trajectory time 0, fed a move along x from 0 to 0.01 m over 2 s,
/// and the feeder's ends: the feed and the withdrawals.
struct Loop {
    ring: TrajectoryRing,
    intake: Intake,
    feed: Sender<FeedItem>,
    withdrawals: Arc<Withdrawals>,
    now: f64,
}

impl Loop {
    fn new() -> Loop {
        let (feed, items) = channel();
        let withdrawals = Arc::new(Withdrawals::default());
        let intake = Intake::new(items).with_withdrawals(withdrawals.clone());
        let mut ring = TrajectoryRing::new(RING_CAPACITY, 500);
        ring.push(at(0.0, 0.0)).unwrap();
        for k in 1..=500 {
            feed.send(FeedItem::Sample(at(k as f64 * 0.004, k as f64 * 2e-5))).unwrap();
        }
        let mut fed = Loop { ring, intake, feed, withdrawals, now: 0.0 };
        fed.fill().unwrap();
        fed
    }

    fn now_ns(&self) -> u64 {
        (self.now * 1e9) as u64
    }

    fn fill(&mut self) -> Result<(), arm_hil::hil::RingError> {
        let now_ns = self.now_ns();
        self.intake.fill(&mut self.ring, self.now, now_ns)
    }

    /// A feeder's next move: its withdrawal asked for (continuing from the loop's present, or
    /// holding), then its mark and `samples` samples 4 ms apart, 10 um each along y.
    fn next_move(&mut self, continuing: bool, samples: u16) -> u64 {
        let n = match continuing {
            true => self.withdrawals.request_continuing(self.now_ns()),
            false => self.withdrawals.request(),
        };
        self.feed.send(FeedItem::Withdrawn(n)).unwrap();
        for k in 1..=samples {
            let t = f64::from(k) * 0.004;
            let x = Vec3::new(0.0, f64::from(k) * 1e-5, 0.2);
            self.feed.send(FeedItem::Sample(Waypoint { t, x, ..Waypoint::default() })).unwrap();
        }
        n
    }

    /// One cycle: withdrawals made, the feed taken in, the ring sampled.
    fn cycle(&mut self, after_s: f64) -> Result<RingSample, arm_hil::hil::RingError> {
        self.now += after_s;
        self.intake.withdraw(&mut self.ring, self.now);
        self.fill()?;
        Ok(self.ring.sample(self.now))
    }

    fn reference_x(&mut self) -> Vec3 {
        match self.ring.sample(self.now) {
            RingSample::Reference(reference) | RingSample::Starved(reference) => reference.x,
            other => panic!("no reference at {} s: {other:?}", self.now),
        }
    }
}

#[test]
fn a_mark_that_comes_before_the_loop_saw_its_withdrawal_withdraws_there() {
    // A loaded machine: the loop looks at the withdrawals, then a goal takes the arm and the
    // feeder marks its withdrawal and queues the goal's samples, then the loop takes in the feed
    // in the same cycle. The goal's samples count from the withdrawal, not from the move before,
    // whose end (2 s) is later than their times would be on it.
    let mut rig = Loop::new();
    rig.cycle(1.0).unwrap();
    let before = rig.reference_x();
    rig.intake.withdraw(&mut rig.ring, rig.now);
    let n = rig.next_move(false, 50);
    rig.fill().expect("the goal's samples follow its withdrawal");
    assert_eq!(rig.withdrawals.done_at(n), Some(rig.now), "withdrawn at the mark's cycle");
    assert_eq!(rig.withdrawals.held_at(n), Some(before), "holding where the reference was");
    rig.cycle(0.1).unwrap();
    assert!((rig.reference_x() - Vec3::new(0.0, 25e-5, 0.2)).norm() < 1e-12, "0.1 s into the goal");
}

#[test]
fn a_continuing_mark_that_comes_before_the_loop_saw_its_withdrawal_replaces_from_there() {
    let mut rig = Loop::new();
    rig.cycle(1.0).unwrap();
    rig.intake.withdraw(&mut rig.ring, rig.now);
    let n = rig.next_move(true, 50);
    rig.fill().expect("the next move's samples follow its withdrawal");
    assert_eq!(rig.withdrawals.done_at(n), Some(rig.now), "replaced at the mark's cycle");
    rig.cycle(0.1).unwrap();
    assert!((rig.reference_x() - Vec3::new(0.0, 25e-5, 0.2)).norm() < 1e-12, "0.1 s into the next move");
}

/// What the loop and the feeder do next, in any order.
#[derive(Debug, Clone)]
enum Step {
    /// A cycle, this many milliseconds after the last.
    Cycle(u8),
    /// The feeder's next move.
    Move { continuing: bool, samples: u16 },
    /// A cycle in which the feeder's next move comes between the loop's look at the withdrawals
    /// and its fill.
    MoveWithinCycle { continuing: bool, samples: u16, after_ms: u8 },
}

/// A move of 40 ms or more: a continuing move is joined up to 20 ms late, its samples until
/// then passed, so one shorter than that may end where the loop's reference was.
fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u8..50).prop_map(Step::Cycle),
        (any::<bool>(), 10u16..300).prop_map(|(continuing, samples)| Step::Move { continuing, samples }),
        (any::<bool>(), 10u16..300, 1u8..5).prop_map(|(continuing, samples, after_ms)| Step::MoveWithinCycle {
            continuing,
            samples,
            after_ms
        }),
    ]
}

proptest! {
    /// However the feeder's moves and the loop's cycles interleave, every sample is taken (none
    /// comes earlier than the one before it: that would stop the motors), and once the feed is
    /// taken in after the newest move, the loop follows that move alone.
    #[test]
    fn every_interleaving_of_moves_and_cycles_is_taken_in(steps in proptest::collection::vec(step(), 1..40)) {
        let mut rig = Loop::new();
        let mut newest = None;
        for step in steps {
            match step {
                Step::Cycle(after_ms) => {
                    rig.cycle(f64::from(after_ms) * PERIOD_S).expect("a cycle takes its feed in");
                }
                Step::Move { continuing, samples } => newest = Some((rig.next_move(continuing, samples), samples)),
                Step::MoveWithinCycle { continuing, samples, after_ms } => {
                    rig.now += f64::from(after_ms) * PERIOD_S;
                    rig.intake.withdraw(&mut rig.ring, rig.now);
                    newest = Some((rig.next_move(continuing, samples), samples));
                    rig.fill().expect("a move that comes within a cycle is taken in");
                }
            }
        }
        rig.cycle(PERIOD_S).expect("a cycle takes its feed in");
        if let Some((n, samples)) = newest {
            prop_assert!(rig.withdrawals.done_at(n).is_some(), "the newest move's withdrawal was made");
            rig.cycle(f64::from(samples) * 0.004 + 0.01).expect("a cycle takes its feed in");
            let end = Vec3::new(0.0, f64::from(samples) * 1e-5, 0.2);
            prop_assert!((rig.reference_x() - end).norm() < 1e-12, "ends at the newest move's end, not at {}", rig.reference_x());
        }
    }
}

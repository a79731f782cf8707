//! The SIL step allocates nothing: a counting global allocator watches the steps of a run
//! (docs/design.md §4: no heap in the per-step path).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use arm_hil::control::arc::ArcSpec;
use arm_hil::control::Trajectory;
use arm_hil::model::Robot;
use arm_hil::sim::{SilConfig, Simulation};

/// Counts the allocations of the calling thread, so that tests running beside it do not count.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Allocations made by `frames` frames of the default arc from the 100th on.
fn allocations_in_steps(config: &SilConfig, frames: usize) -> u64 {
    let robot = Robot::default();
    let waypoints = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).unwrap();
    let trajectory = Arc::new(Trajectory::with_robot_forearm(waypoints, &robot).unwrap());
    let mut simulation = Simulation::new(robot, trajectory, config).unwrap();
    simulation.by_ref().take(100).for_each(|frame| assert!(frame.is_ok()));
    let before = allocations();
    let taken = simulation.by_ref().take(frames).filter(Result::is_ok).count();
    let after = allocations();
    assert_eq!(taken, frames, "the run must go on");
    after - before
}

#[test]
fn accepted_steps_with_control_ticks_allocate_nothing() {
    assert_eq!(allocations_in_steps(&SilConfig::default(), 5_000), 0);
}

#[test]
fn frames_interpolated_on_a_grid_allocate_nothing() {
    let mut config = SilConfig::default();
    config.run.frame_rate_hz = 1500.0;
    assert_eq!(allocations_in_steps(&config, 5_000), 0);
}

#[test]
fn the_counter_sees_an_allocation() {
    let before = allocations();
    let boxed = std::hint::black_box(Box::new(1u64));
    assert_eq!(allocations() - before, 1);
    drop(boxed);
}

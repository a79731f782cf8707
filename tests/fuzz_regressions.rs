//! The fuzz targets (fuzz/, run with cargo-fuzz) without the fuzzer: every target on its seed
//! inputs and on every input that ever made it fail, kept in fuzz/regressions/TARGET/, with the
//! fuzzers' bound on a single allocation.

#[path = "../fuzz/src/lib.rs"]
#[allow(unreachable_pub)] // public for the fuzz crate, private to this test
mod harness;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

/// The largest single allocation an input may make, as the fuzzers run (`-malloc_limit_mb=64`).
const ALLOCATION_BOUND_BYTES: usize = 64 << 20;

/// The system allocator, noting the largest allocation each thread asks for, so an input that
/// reserves a length it read before checking it fails here as it does under the fuzzer.
struct NotingLargest;

thread_local! {
    static LARGEST_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    let _ = LARGEST_BYTES.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every call goes to `System` unchanged; noting a size allocates nothing.
unsafe impl GlobalAlloc for NotingLargest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: NotingLargest = NotingLargest;

/// Runs `target` on `input` and fails if any single allocation went past the bound.
fn run_within_bound(name: &str, target: harness::Target, input: &[u8]) {
    LARGEST_BYTES.with(|largest| largest.set(0));
    target(input);
    let largest = LARGEST_BYTES.with(Cell::get);
    assert!(largest <= ALLOCATION_BOUND_BYTES, "{name} allocated {largest} bytes at once");
}

#[test]
fn every_target_takes_its_seeds() {
    for (name, target) in harness::TARGETS {
        let seeds = harness::seeds(name);
        assert!(!seeds.is_empty(), "{name} has no seeds");
        for seed in seeds {
            run_within_bound(name, target, &seed);
        }
    }
}

#[test]
fn every_input_that_ever_failed_a_target_passes_it_now() {
    let regressions = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions");
    let mut ran = 0;
    for (name, target) in harness::TARGETS {
        let Ok(entries) = std::fs::read_dir(regressions.join(name)) else { continue };
        for entry in entries {
            let path = entry.expect("a readable folder").path();
            let input = std::fs::read(&path).expect("a readable input");
            eprintln!("{name}: {}", path.display());
            run_within_bound(name, target, &input);
            ran += 1;
        }
    }
    eprintln!("{ran} regression inputs");
}

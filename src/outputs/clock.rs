//! The wall clock as the nodes stamp with it.

/// Now on the wall clock [ns since the Unix epoch]: the time axis of hardware runs, as the
/// nodes stamp them without simulated time.
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos() as u64)
}

//! What the ROS nodes do, without ROS: parameters into configuration, messages into library
//! types, joint states for the URDF, and the nodes' run loops producing plain data. The `ros`
//! module (feature `ros`) only moves this data in and out of r2r.

pub mod joints;
pub mod messages;
pub mod params;
pub mod sil;
pub mod stm32;
pub mod vr;
pub mod arduino;
pub mod hil;
pub mod legacy;

/// Passes one sample per period of its time axis [s]: how nodes publish a simulator's steps or
/// a loop's cycles at their publish rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decimator {
    period: f64,
    next: Option<f64>,
}

impl Decimator {
    /// One sample every `1 / rate_hz` seconds.
    pub fn new(rate_hz: f64) -> Decimator {
        Decimator { period: 1.0 / rate_hz, next: None }
    }

    /// True when the sample at `t` [s] is due. Samples keep to a grid of whole periods (with a
    /// millionth of a period of slack for rounding); time that restarts or jumps starts a new grid.
    pub fn due(&mut self, t: f64) -> bool {
        let slack = self.period * 1e-6;
        match self.next {
            Some(next) if t + slack < next && t + slack >= next - self.period => false,
            Some(next) if t + slack >= next && t < next + self.period => {
                self.next = Some(next + self.period);
                true
            }
            _ => {
                self.next = Some(t + self.period);
                true
            }
        }
    }
}

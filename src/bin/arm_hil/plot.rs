//! `--plot`: tracking error and joint torques over time as SVG, from a bounded sample of frames.

use std::path::Path;

use plotters::prelude::*;

use arm_hil::sim::Frame;

/// One plotted sample: time [s], tracking error [mm], joint torques [N m].
#[derive(Debug, Clone, Copy)]
struct Sample {
    t: f64,
    error_mm: f64,
    tau: [f64; 3],
}

/// Keeps at most `CAPACITY` evenly spaced samples of a run of any length: when full, every
/// other sample is dropped and the recording stride doubles.
#[derive(Debug)]
pub(crate) struct PlotRecorder {
    samples: Vec<Sample>,
    stride: u64,
    seen: u64,
}

impl PlotRecorder {
    const CAPACITY: usize = 4096;

    pub(crate) fn new() -> PlotRecorder {
        PlotRecorder { samples: Vec::with_capacity(Self::CAPACITY), stride: 1, seen: 0 }
    }

    pub(crate) fn record(&mut self, frame: &Frame) {
        self.seen += 1;
        if self.seen % self.stride != 0 {
            return;
        }
        if self.samples.len() == Self::CAPACITY {
            let mut keep = false;
            self.samples.retain(|_| {
                keep = !keep;
                keep
            });
            self.stride *= 2;
        }
        self.samples.push(Sample { t: frame.t, error_mm: frame.tracking_error().norm() * 1e3, tau: frame.tau.into() });
    }

    pub(crate) fn draw(&self, path: &Path) -> anyhow::Result<()> {
        let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, bottom) = root.split_vertically(340);
        let (t0, t1) = match (self.samples.first(), self.samples.last()) {
            (Some(first), Some(last)) if last.t > first.t => (first.t, last.t),
            _ => (0.0, 1.0),
        };
        let max_error = self.samples.iter().map(|s| s.error_mm).fold(1e-3, f64::max);
        let mut error_chart = ChartBuilder::on(&top)
            .caption("Cartesian tracking error", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(t0..t1, 0.0..max_error * 1.1)?;
        error_chart.configure_mesh().x_desc("t [s]").y_desc("|x - x_ref| [mm]").draw()?;
        error_chart.draw_series(LineSeries::new(self.samples.iter().map(|s| (s.t, s.error_mm)), &BLUE))?;

        let max_tau = self.samples.iter().flat_map(|s| s.tau).map(f64::abs).fold(1e-3, f64::max) * 1.1;
        let mut torque_chart = ChartBuilder::on(&bottom)
            .caption("Joint torques", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(t0..t1, -max_tau..max_tau)?;
        torque_chart.configure_mesh().x_desc("t [s]").y_desc("tau [N m]").draw()?;
        for (joint, colour) in [(0, RED), (1, GREEN), (2, BLUE)] {
            torque_chart
                .draw_series(LineSeries::new(self.samples.iter().map(|s| (s.t, s.tau[joint])), &colour))?
                .label(format!("joint {}", joint + 1))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        }
        torque_chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
        root.present()?;
        Ok(())
    }
}

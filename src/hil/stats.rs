//! The HIL loop's statistics: period jitter, overruns, tracking error and the rest, kept by the
//! loop without allocating and read when it ends or, once a second, while it runs.

/// Loop statistics. Period jitter is how late each cycle woke after its deadline.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopStats {
    pub rate_hz: f64,
    pub cycles: u64,
    /// Cycles whose work ended after the next deadline.
    pub overruns: u64,
    /// The longest overrun past the next deadline [us].
    pub longest_overrun_us: f64,
    /// Periods skipped after overruns.
    pub skipped_periods: u64,
    pub jitter_max_us: f64,
    /// Lateness histogram in 1 us bins; the last bin holds everything beyond.
    jitter_histogram: Box<[u32; Self::HISTOGRAM_BINS]>,
    /// Integral of the squared tracking error [m^2 s] and its span [s].
    squared_error_integral: f64,
    error_time: f64,
    pub max_error_m: f64,
    pub sensor_readings: u64,
    /// Readings the rig cannot produce, rejected by the estimator's gate.
    pub rejected_readings: u64,
    pub starved_cycles: u64,
    pub low_water_events: u64,
    pub frames_dropped: u64,
    pub ik_fallbacks: u64,
    /// True when the tracking error is measured against the true position (simulated rigs);
    /// false when against the estimate.
    pub error_from_truth: bool,
    /// The largest electrical lag of any stepper drive [rad] (0 for other backends).
    pub max_lag_rad: f64,
}

impl LoopStats {
    const HISTOGRAM_BINS: usize = 2001;

    pub(super) fn new(rate_hz: f64) -> LoopStats {
        LoopStats {
            rate_hz,
            cycles: 0,
            overruns: 0,
            longest_overrun_us: 0.0,
            skipped_periods: 0,
            jitter_max_us: 0.0,
            jitter_histogram: Box::new([0; Self::HISTOGRAM_BINS]),
            squared_error_integral: 0.0,
            error_time: 0.0,
            max_error_m: 0.0,
            sensor_readings: 0,
            rejected_readings: 0,
            starved_cycles: 0,
            low_water_events: 0,
            frames_dropped: 0,
            ik_fallbacks: 0,
            error_from_truth: false,
            max_lag_rad: 0.0,
        }
    }

    pub(super) fn record_lateness(&mut self, lateness_us: f64) {
        let bin = (lateness_us.max(0.0) as usize).min(Self::HISTOGRAM_BINS - 1);
        self.jitter_histogram[bin] += 1;
        self.jitter_max_us = self.jitter_max_us.max(lateness_us);
    }

    /// The `p`-quantile (0..1) of the period jitter [us], to the 1 us bin.
    pub fn jitter_quantile_us(&self, p: f64) -> f64 {
        let total: u64 = self.jitter_histogram.iter().map(|&count| u64::from(count)).sum();
        let rank = (p * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bin, &count) in self.jitter_histogram.iter().enumerate() {
            seen += u64::from(count);
            if seen >= rank {
                return bin as f64;
            }
        }
        0.0
    }

    /// A cycle of `period` [s] tracked with `error_m` [m].
    pub(super) fn record_error(&mut self, error_m: f64, period: f64) {
        self.squared_error_integral += error_m * error_m * period;
        self.error_time += period;
        self.max_error_m = self.max_error_m.max(error_m);
    }

    /// Time-weighted RMS tracking error [m].
    pub fn rms_error_m(&self) -> f64 {
        if self.error_time > 0.0 {
            (self.squared_error_integral / self.error_time).sqrt()
        } else {
            0.0
        }
    }
}

/// The loop's figures so far, refreshed about once a second while it runs (for /diagnostics
/// and hil_node's ~/loop_statistics).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LoopStatus {
    pub rate_hz: f64,
    pub cycles: u64,
    pub overruns: u64,
    pub longest_overrun_us: f64,
    pub skipped_periods: u64,
    pub jitter_p50_us: f64,
    pub jitter_p99_us: f64,
    pub jitter_max_us: f64,
    pub rms_error_m: f64,
    pub max_error_m: f64,
    pub error_from_truth: bool,
    pub sensor_readings: u64,
    /// Readings the rig cannot produce, rejected by the estimator's gate.
    pub rejected_readings: u64,
    pub starved_cycles: u64,
}

impl LoopStats {
    pub fn status(&self) -> LoopStatus {
        LoopStatus {
            rate_hz: self.rate_hz,
            cycles: self.cycles,
            overruns: self.overruns,
            longest_overrun_us: self.longest_overrun_us,
            skipped_periods: self.skipped_periods,
            jitter_p50_us: self.jitter_quantile_us(0.5),
            jitter_p99_us: self.jitter_quantile_us(0.99),
            jitter_max_us: self.jitter_max_us,
            rms_error_m: self.rms_error_m(),
            max_error_m: self.max_error_m,
            error_from_truth: self.error_from_truth,
            sensor_readings: self.sensor_readings,
            rejected_readings: self.rejected_readings,
            starved_cycles: self.starved_cycles,
        }
    }
}

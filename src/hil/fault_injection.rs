//! A test-only fault hook: with `ARM_HIL_INJECT_FAULT=KIND:THREAD:S` in the environment, the
//! thread named THREAD panics (KIND `panic`) or stops for good (KIND `hang`) S seconds after it made
//! its injection, at its next [`FaultInjection::check`], so that a test can show what a panic or a
//! stuck thread that owns, feeds or publishes for a device does to the device (docs/testing.md,
//! docs/safety.md "Exit paths"). Unset, as outside those tests, a check is one comparison. Never
//! set it on a rig.

use std::time::{Duration, Instant};

/// The fault hook's variable.
pub const INJECT_FAULT: &str = "ARM_HIL_INJECT_FAULT";

/// What an injected fault does to its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Panic,
    Hang,
}

/// A thread's injected fault, if the environment names the thread.
#[derive(Debug, Clone, Copy)]
pub struct FaultInjection {
    due: Option<(Fault, Instant)>,
}

impl FaultInjection {
    /// The injection for the calling thread, as the environment says.
    pub fn for_this_thread() -> FaultInjection {
        let thread = std::thread::current();
        let due = std::env::var(INJECT_FAULT).ok().and_then(|spec| {
            let mut fields = spec.split(':');
            let fault = match fields.next()? {
                "panic" => Fault::Panic,
                "hang" => Fault::Hang,
                _ => return None,
            };
            let name = fields.next()?;
            let after_s: f64 = fields.next()?.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0)?;
            (thread.name() == Some(name)).then(|| (fault, Instant::now() + Duration::from_secs_f64(after_s)))
        });
        FaultInjection { due }
    }

    /// Panics, or stops the thread for good, once the injection's time has come.
    pub fn check(&self) {
        match self.due {
            Some((Fault::Panic, at)) if Instant::now() >= at => panic!("a panic injected by {INJECT_FAULT}"),
            Some((Fault::Hang, at)) if Instant::now() >= at => loop {
                std::thread::park();
            },
            _ => {}
        }
    }
}

//! Refusals of a command stream, said once while they last: ros2_control's topic-based hardware
//! sends its controllers' commands every cycle, so a node that cannot take them (inactive, say)
//! would otherwise log the same refusal at the controllers' rate. A refusal is the same as the
//! one before when only its figures differ (a time, an offset, a sign): a stream refused for a
//! bound is refused so on every command, each with its own figures, and its lines once took a
//! bringup to most of a core.

use crate::nodes::follower::stream_gate::HELD;

/// Why the commands of one stream are refused, while they keep being refused for it.
#[derive(Debug, Default)]
pub struct Refusals {
    /// The last refusal's words, its figures left out ([`words`]).
    last: Option<String>,
}

/// `reason` without its figures: digits, signs and decimal points.
fn words(reason: &str) -> String {
    reason.chars().filter(|c| !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.'))).collect()
}

impl Refusals {
    /// What to say of a command's `outcome`: why it was refused, unless the command before was
    /// refused for the same (its figures aside); nothing when it got through (the next refusal
    /// is said again).
    pub fn said(&mut self, outcome: Result<(), String>) -> Option<String> {
        match outcome {
            Ok(()) => {
                self.last = None;
                None
            }
            Err(reason) => {
                let words = words(&reason);
                (self.last.as_ref() != Some(&words)).then(|| {
                    self.last = Some(words);
                    reason
                })
            }
        }
    }

    /// Logs what [`Refusals::said`] says of a command on `topic`: the command in force held
    /// ([`HELD`], as at every ros2_control bringup, before its controllers are active) as news,
    /// any other refusal as an error.
    pub fn log(&mut self, topic: &str, outcome: Result<(), String>) {
        match self.said(outcome) {
            Some(reason) if reason == HELD => log::info!("{topic} held: {reason} (said once while it lasts)"),
            Some(reason) => log::error!("{topic} refused: {reason} (said once while it lasts)"),
            None => {}
        }
    }
}

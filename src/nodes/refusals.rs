//! Refusals of a command stream, said once while they last: ros2_control's topic-based hardware
//! sends its controllers' commands every cycle, so a node that cannot take them (inactive, say)
//! would otherwise log the same refusal at the controllers' rate.

use crate::nodes::follower::stream_gate::HELD;

/// Why the commands of one stream are refused, while they keep being refused for it.
#[derive(Debug, Default)]
pub struct Refusals {
    last: Option<String>,
}

impl Refusals {
    /// What to say of a command's `outcome`: why it was refused, unless the command before was
    /// refused for the same; nothing when it got through (the next refusal is said again).
    pub fn said(&mut self, outcome: Result<(), String>) -> Option<String> {
        match outcome {
            Ok(()) => {
                self.last = None;
                None
            }
            Err(reason) => (self.last.as_ref() != Some(&reason)).then(|| {
                self.last = Some(reason.clone());
                reason
            }),
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

//! Refusals of a command stream, said once while they last: ros2_control's topic-based hardware
//! sends its controllers' commands every cycle, so a node that cannot take them (inactive, say)
//! would otherwise log the same refusal at the controllers' rate.

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
}

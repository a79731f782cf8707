//! Refusals of a command stream, said once while they last and at most once a second:
//! ros2_control's topic-based hardware sends its controllers' commands every cycle, so a node
//! that cannot take them (inactive, say) would otherwise log the same refusal at the
//! controllers' rate. A refusal is the same as the one before when only its figures differ (a
//! time, an offset): a stream refused for a bound is refused so on every command, each with its
//! own figures, and its lines once took a bringup to most of a core. Refusals that differ (a
//! stream that names two unknown joints in turn) are said at most once a second, each line
//! counting those held back since the one before.

use std::time::{Duration, Instant};

use crate::nodes::follower::stream_gate::HELD;

/// The least time between two lines of refusals that differ.
pub const SAID_AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// Why the commands of one stream are refused, while they keep being refused for it.
#[derive(Debug, Default)]
pub struct Refusals {
    /// The words of the refusal said last ([`words`]), while commands keep being refused.
    last: Option<String>,
    /// When a refusal was said last.
    said_at: Option<Instant>,
    /// Refusals not said since then, for differing from the last within a second.
    held_back: u64,
}

/// `reason` with each figure (a number with a decimal point, and its sign) as `#`: what stays
/// are its words, and the numbers that name things (`motor 3`, `joint1`, `3 joints`).
fn words(reason: &str) -> String {
    let mut words = String::with_capacity(reason.len());
    let mut chars = reason.char_indices().peekable();
    let mut before: Option<char> = None;
    while let Some((start, c)) = chars.next() {
        let in_a_name = before.is_some_and(|b| b.is_alphanumeric() || b == '_' || b == '`');
        let starts_a_number =
            c.is_ascii_digit() || (matches!(c, '+' | '-') && chars.peek().is_some_and(|(_, n)| n.is_ascii_digit()));
        if !starts_a_number || in_a_name {
            words.push(c);
            before = Some(c);
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(at, n)) = chars.peek() {
            if !(n.is_ascii_digit() || n == '.') {
                break;
            }
            end = at + n.len_utf8();
            chars.next();
        }
        let number = &reason[start..end];
        // A full stop after a number ends the sentence; one inside it makes it a figure.
        let figure = number.trim_end_matches('.').contains('.');
        words.push_str(if figure { "#" } else { number });
        before = number.chars().last();
    }
    words
}

impl Refusals {
    /// What to say at `now` of a command's `outcome`: why it was refused, unless the command
    /// before was refused for the same (its figures aside), or a refusal was said less than
    /// [`SAID_AT_MOST_EVERY`] ago (then it is counted, and the next line says how many were
    /// held back); nothing when it got through (the next refusal is said again).
    pub fn said(&mut self, now: Instant, outcome: Result<(), String>) -> Option<String> {
        let reason = match outcome {
            Ok(()) => {
                self.last = None;
                return None;
            }
            Err(reason) => reason,
        };
        let words = words(&reason);
        if self.last.as_ref() == Some(&words) {
            return None;
        }
        if self.said_at.is_some_and(|at| now.saturating_duration_since(at) < SAID_AT_MOST_EVERY) {
            self.held_back += 1;
            return None;
        }
        let held_back = std::mem::take(&mut self.held_back);
        (self.last, self.said_at) = (Some(words), Some(now));
        Some(match held_back {
            0 => reason,
            n => format!("{reason} ({n} other refusals held back since the line before)"),
        })
    }

    /// Logs what [`Refusals::said`] says now of a command on `topic`: the command in force held
    /// ([`HELD`], as at every ros2_control bringup, before its controllers are active) as news,
    /// any other refusal as an error.
    pub fn log(&mut self, topic: &str, outcome: Result<(), String>) {
        match self.said(Instant::now(), outcome) {
            Some(reason) if reason.starts_with(HELD) => log::info!("{topic} held: {reason} (said once while it lasts)"),
            Some(reason) => log::error!("{topic} refused: {reason} (said once while it lasts)"),
            None => {}
        }
    }
}

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
    /// The first refusal that differed from the last said within its second, to be said next.
    first_held: Option<String>,
    /// How many refusals that differed from the last said came within its second.
    held_back: u64,
}

/// A refusal to say, and how many were held back since the line before (itself among them
/// when it was).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Said {
    pub reason: String,
    pub held_back: u64,
}

impl std::fmt::Display for Said {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Client text (a joint's name) is in a reason: shown escaped, and cut.
        let mut shown: String = self.reason.chars().flat_map(char::escape_debug).take(SHOWN_CHARS + 1).collect();
        let cut = match shown.chars().count() > SHOWN_CHARS {
            true => {
                shown.pop();
                "..."
            }
            false => "",
        };
        match self.held_back {
            0 => write!(f, "{shown}{cut}"),
            n => write!(f, "{shown}{cut} ({n} refusals held back since the line before)"),
        }
    }
}

/// The most of a reason a line shows [chars].
const SHOWN_CHARS: usize = 300;

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
    /// What to say at `now` of a command's `outcome`. A refusal is said unless the one said
    /// last was the same (its figures aside) and nothing else came since, or a refusal was said
    /// less than [`SAID_AT_MOST_EVERY`] ago: then a differing one is held back, counted, and
    /// the first of them said once the second is over, at the next command. A command that got
    /// through says only that: the next refusal is said again (at most once a second).
    pub fn said(&mut self, now: Instant, outcome: Result<(), String>) -> Option<Said> {
        let in_its_second = self.said_at.is_some_and(|at| now.saturating_duration_since(at) < SAID_AT_MOST_EVERY);
        let reason = match outcome {
            Ok(()) => {
                self.last = None;
                // A refusal held back is said once its second is over, though commands now get
                // through: it is not kept waiting for the next refusal.
                return match in_its_second {
                    true => None,
                    false => self.first_held.take().map(|first| {
                        self.said_at = Some(now);
                        Said { reason: first, held_back: std::mem::take(&mut self.held_back) }
                    }),
                };
            }
            Err(reason) => reason,
        };
        let kind = words(&reason);
        let new = self.last.as_ref() != Some(&kind);
        if in_its_second || (!new && self.first_held.is_none()) {
            if new {
                self.held_back += 1;
                self.first_held.get_or_insert(reason);
            }
            return None;
        }
        let held_back = std::mem::take(&mut self.held_back);
        let said = match self.first_held.take() {
            Some(first) => {
                // This refusal waits for the next second, unless it is the one said now.
                let first_kind = words(&first);
                if first_kind != kind {
                    (self.first_held, self.held_back) = (Some(reason), 1);
                }
                self.last = Some(first_kind);
                Said { reason: first, held_back }
            }
            None => {
                self.last = Some(kind);
                Said { reason, held_back }
            }
        };
        self.said_at = Some(now);
        Some(said)
    }

    /// Logs what [`Refusals::said`] says now of a command on `topic`: the command in force held
    /// ([`HELD`], as at every ros2_control bringup, before its controllers are active) as news,
    /// any other refusal as an error.
    pub fn log(&mut self, topic: &str, outcome: Result<(), String>) {
        match self.said(Instant::now(), outcome) {
            Some(said) if said.reason == HELD => log::info!("{topic} held: {said} (not said again while it lasts)"),
            Some(said) => log::error!("{topic} refused: {said} (not said again while it lasts)"),
            None => {}
        }
    }
}

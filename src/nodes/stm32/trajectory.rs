//! stm32_driver's `~/joint_trajectory`, played: each point's angle targets go to the firmware at
//! the point's time from the trajectory's arrival. A new trajectory replaces the one playing (as
//! a trajectory controller does); an empty one stops it, and so does the node's deactivation.
//! [`TrajectoryPlayer`] is the pure schedule; [`play_trajectories`] the thread that keeps it.

use std::collections::VecDeque;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::protocol::stm32::Command;

/// What the playing thread is asked.
#[derive(Debug, Clone, PartialEq)]
pub enum PlayerRequest {
    /// Play these targets at their times [s] from now, in place of what plays.
    Play(Vec<(f64, Command)>),
    /// Stop playing (the servos hold their last target).
    Stop,
}

/// The targets still to send, each with when it is due.
#[derive(Debug, Default)]
pub struct TrajectoryPlayer {
    due: VecDeque<(Instant, Command)>,
}

impl TrajectoryPlayer {
    /// Acts on `request`, which came at `now`.
    pub fn request(&mut self, request: PlayerRequest, now: Instant) {
        self.due.clear();
        if let PlayerRequest::Play(schedule) = request {
            let at = |time: f64| now + Duration::from_secs_f64(time.max(0.0));
            self.due.extend(schedule.into_iter().map(|(time, command)| (at(time), command)));
        }
    }

    /// When the next target is due, if one is left.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|(at, _)| *at)
    }

    /// The next target if it is due at `now`.
    pub fn take_due(&mut self, now: Instant) -> Option<Command> {
        match self.next_due() {
            Some(at) if at <= now => self.due.pop_front().map(|(_, command)| command),
            _ => None,
        }
    }
}

/// How long the thread waits with nothing to play, between looks at its requests.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// Plays trajectories asked for on `requests`, handing each target to `send` when due, until
/// the requests' sender is gone. A target `send` refuses (false: the node is not active) stops
/// the trajectory it belongs to.
pub fn play_trajectories(requests: &Receiver<PlayerRequest>, mut send: impl FnMut(Command) -> bool) {
    let mut player = TrajectoryPlayer::default();
    loop {
        let wait = player.next_due().map_or(IDLE_WAIT, |at| at.saturating_duration_since(Instant::now()));
        match requests.recv_timeout(wait) {
            Ok(request) => player.request(request, Instant::now()),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        while let Some(command) = player.take_due(Instant::now()) {
            if !send(command) {
                player.request(PlayerRequest::Stop, Instant::now());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(shoulder: f32) -> Command {
        Command::SetJointAngles { shoulder, elbow: 0.0 }
    }

    #[test]
    fn targets_go_out_in_order_at_their_times() {
        let (mut player, start) = (TrajectoryPlayer::default(), Instant::now());
        player.request(PlayerRequest::Play(vec![(0.0, target(0.1)), (0.5, target(0.2))]), start);
        assert_eq!(player.take_due(start), Some(target(0.1)));
        assert_eq!(player.take_due(start + Duration::from_millis(499)), None);
        assert_eq!(player.next_due(), Some(start + Duration::from_millis(500)));
        assert_eq!(player.take_due(start + Duration::from_millis(500)), Some(target(0.2)));
        assert_eq!(player.next_due(), None);
    }

    #[test]
    fn a_new_trajectory_replaces_the_one_playing_and_stop_clears_it() {
        let (mut player, start) = (TrajectoryPlayer::default(), Instant::now());
        player.request(PlayerRequest::Play(vec![(1.0, target(0.1)), (2.0, target(0.2))]), start);
        let later = start + Duration::from_millis(300);
        player.request(PlayerRequest::Play(vec![(1.0, target(0.3))]), later);
        assert_eq!(player.take_due(start + Duration::from_millis(1000)), None, "timed from its own arrival");
        assert_eq!(player.take_due(later + Duration::from_secs(1)), Some(target(0.3)));
        assert_eq!(player.take_due(later + Duration::from_secs(5)), None, "the replaced points never go");
        player.request(PlayerRequest::Play(vec![(1.0, target(0.4))]), later);
        player.request(PlayerRequest::Stop, later);
        assert_eq!(player.next_due(), None);
    }

    #[test]
    fn the_thread_plays_until_its_requests_end() {
        let (requests, received) = std::sync::mpsc::channel();
        let played = std::thread::spawn(move || {
            let mut sent = Vec::new();
            play_trajectories(&received, |command| {
                sent.push(command);
                true
            });
            sent
        });
        requests.send(PlayerRequest::Play(vec![(0.0, target(0.1)), (0.05, target(0.2))])).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        drop(requests);
        assert_eq!(played.join().unwrap(), [target(0.1), target(0.2)]);
    }

    #[test]
    fn a_refused_target_stops_its_trajectory() {
        let (requests, received) = std::sync::mpsc::channel();
        let played = std::thread::spawn(move || {
            let mut tries = 0;
            play_trajectories(&received, |_| {
                tries += 1;
                false
            });
            tries
        });
        requests.send(PlayerRequest::Play(vec![(0.0, target(0.1)), (0.01, target(0.2))])).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(requests);
        assert_eq!(played.join().unwrap(), 1);
    }
}

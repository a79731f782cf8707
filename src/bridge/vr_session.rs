//! One end of a Deltarobot VR connection as a state machine, with no I/O and no clock.
//!
//! Both ends send magic and version first and expect the peer's first two messages to be the
//! same, within a timeout. The leader pings every second with a random value and closes the
//! link when the pong does not come back in time; the follower answers every ping. Whoever
//! closes sends End of transmission with a reason.
//!
//! Call order: [`VrSession::handle_bytes`], [`VrSession::send`] and [`VrSession::close`] as
//! things happen; [`VrSession::handle_timeout`] once [`VrSession::poll_timeout`] has passed; then
//! drain [`VrSession::poll_transmit`] and [`VrSession::poll_event`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::protocol::deltavr::{encode, VrDecoder, VrMessage, MAGIC, VERSION};

/// Which end of the link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Role {
    /// The server: pings every `ping_period` and wants each pong within `pong_timeout`.
    Leader { ping_period: Duration, pong_timeout: Duration },
    /// The client: answers pings.
    Follower,
}

/// What the session reports.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// Both sides sent magic and version.
    Established,
    /// An exercise message from the peer.
    Message(VrMessage),
    /// A message the peer sent that could not be used; the link goes on.
    Refused(String),
    /// The link is closed: by the peer's End of transmission, or by this side (which sent one).
    Closed { by_peer: bool, reason: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handshake {
    Waiting { got_magic: bool },
    Done,
}

/// One end of a connection.
#[derive(Debug)]
pub struct VrSession {
    role: Role,
    decoder: VrDecoder,
    handshake: Handshake,
    handshake_deadline: Instant,
    next_ping: Instant,
    /// The ping waiting for its pong, and when it must have come.
    pending_ping: Option<(u64, Instant)>,
    rng: ChaCha8Rng,
    outbox: Vec<u8>,
    events: VecDeque<SessionEvent>,
    closed: bool,
}

impl VrSession {
    /// A session that has just connected: magic and version are queued. `seed` makes the pings.
    pub fn new(role: Role, now: Instant, handshake_timeout: Duration, max_variable_len: u32, seed: u64) -> VrSession {
        let mut session = VrSession {
            role,
            decoder: VrDecoder::new(max_variable_len),
            handshake: Handshake::Waiting { got_magic: false },
            handshake_deadline: now + handshake_timeout,
            next_ping: now,
            pending_ping: None,
            rng: ChaCha8Rng::seed_from_u64(seed),
            outbox: Vec::with_capacity(256),
            events: VecDeque::new(),
            closed: false,
        };
        encode(&VrMessage::Magic(MAGIC), &mut session.outbox);
        encode(&VrMessage::Version(VERSION), &mut session.outbox);
        session
    }

    pub fn is_established(&self) -> bool {
        self.handshake == Handshake::Done && !self.closed
    }

    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends an exercise message once the link is established; dropped before and after.
    pub fn send(&mut self, message: &VrMessage) {
        if self.is_established() {
            encode(message, &mut self.outbox);
        }
    }

    /// Closes the link with End of transmission and `reason`.
    pub fn close(&mut self, reason: &str) {
        if self.closed {
            return;
        }
        encode(&VrMessage::EndOfTransmission(reason.to_owned()), &mut self.outbox);
        self.closed = true;
        self.events.push_back(SessionEvent::Closed { by_peer: false, reason: reason.to_owned() });
    }

    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.decoder.push(bytes);
        while !self.closed {
            match self.decoder.poll() {
                None => break,
                Some(Ok(message)) => self.handle_message(now, message),
                Some(Err(error)) if error.is_fatal() => self.close(&error.to_string()),
                Some(Err(error)) => self.events.push_back(SessionEvent::Refused(error.to_string())),
            }
        }
    }

    fn handle_message(&mut self, now: Instant, message: VrMessage) {
        if let VrMessage::EndOfTransmission(reason) = &message {
            self.closed = true;
            self.events.push_back(SessionEvent::Closed { by_peer: true, reason: reason.clone() });
            return;
        }
        match (self.handshake, &message) {
            (Handshake::Waiting { got_magic: false }, VrMessage::Magic(magic)) if *magic == MAGIC => {
                self.handshake = Handshake::Waiting { got_magic: true };
            }
            (Handshake::Waiting { got_magic: true }, VrMessage::Version(VERSION)) => {
                self.handshake = Handshake::Done;
                self.next_ping = now;
                self.events.push_back(SessionEvent::Established);
            }
            (Handshake::Waiting { .. }, other) => {
                self.close(&format!("expected magic and version first, got {other:?}"))
            }
            (Handshake::Done, VrMessage::Ping(value)) if self.role == Role::Follower => {
                encode(&VrMessage::Pong(*value), &mut self.outbox);
            }
            (Handshake::Done, VrMessage::Pong(value)) => {
                if self.pending_ping.is_some_and(|(pending, _)| pending == *value) {
                    self.pending_ping = None;
                }
            }
            (Handshake::Done, VrMessage::Magic(_) | VrMessage::Version(_) | VrMessage::Ping(_)) => {}
            (Handshake::Done, _) => self.events.push_back(SessionEvent::Message(message)),
        }
    }

    /// The earliest deadline: the handshake's, the next ping, the pending pong.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.closed {
            return None;
        }
        match (self.handshake, self.role) {
            (Handshake::Waiting { .. }, _) => Some(self.handshake_deadline),
            (Handshake::Done, Role::Follower) => None,
            (Handshake::Done, Role::Leader { .. }) => {
                Some(self.pending_ping.map_or(self.next_ping, |(_, deadline)| deadline.min(self.next_ping)))
            }
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        if let Handshake::Waiting { .. } = self.handshake {
            if now >= self.handshake_deadline {
                self.close("no magic and version in time");
            }
            return;
        }
        let Role::Leader { ping_period, pong_timeout } = self.role else { return };
        if self.pending_ping.is_some_and(|(_, deadline)| now >= deadline) {
            return self.close(&format!("no pong within {pong_timeout:?}"));
        }
        if now >= self.next_ping {
            let value = self.rng.next_u64();
            encode(&VrMessage::Ping(value), &mut self.outbox);
            // An unanswered older ping keeps its deadline: it is the one that is late.
            if self.pending_ping.is_none() {
                self.pending_ping = Some((value, now + pong_timeout));
            }
            self.next_ping = now + ping_period;
        }
    }

    /// Moves the bytes to send into `buf`; false when there are none.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> bool {
        if self.outbox.is_empty() {
            return false;
        }
        buf.append(&mut self.outbox);
        true
    }

    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }
}

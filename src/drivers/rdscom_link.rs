//! The GUI side of rdscom as a state machine, with no I/O and no clock (docs/rdscom.md).
//!
//! Call order: feed [`RdscomLink::handle_bytes`] and requests ([`RdscomLink::request`]); call
//! [`RdscomLink::handle_timeout`] once [`RdscomLink::poll_timeout`] has passed (spurious calls do
//! nothing); then drain [`RdscomLink::poll_transmit`] and [`RdscomLink::poll_event`].

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::protocol::rdscom::{encode, EncodeError, FrameDecoder, FrameType, Message, PrototypeTable, Value};

/// Which built-in prototype table, or a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TableChoice {
    /// The message document's table (docs/rdscom.md).
    Document,
    /// The newer firmware's table (docs/rdscom.md).
    Firmware,
}

/// Link settings. Defaults as docs/rdscom.md gives them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RdscomConfig {
    /// Baud rate, 8N1. Default 115200.
    pub baud: u32,
    /// Wait before resending an unacknowledged request [s]. Default 1.0.
    pub retry_timeout_s: f64,
    /// Resends before a request is reported failed. Default 3.
    pub retries: u32,
    /// Heartbeat period [s]. Default 0.1.
    pub heartbeat_period_s: f64,
    /// Heartbeats that may go unanswered before the link is LOST. Default 3.
    pub heartbeat_misses: u32,
    pub table: TableChoice,
}

impl Default for RdscomConfig {
    fn default() -> Self {
        RdscomConfig {
            baud: 115_200,
            retry_timeout_s: 1.0,
            retries: 3,
            heartbeat_period_s: 0.1,
            heartbeat_misses: 3,
            table: TableChoice::Document,
        }
    }
}

/// Link health from heartbeat acknowledgements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RdscomLinkState {
    /// A heartbeat was acknowledged within the last `heartbeat_misses` periods.
    Up,
    /// Not (or no longer) acknowledged.
    Lost,
}

/// A request refused before it was sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    #[error(transparent)]
    Encode(#[from] EncodeError),
    #[error("{pending} requests wait for their acknowledgement: a request flood is refused")]
    Busy { pending: usize },
}

/// What the link reports.
#[derive(Debug, Clone, PartialEq)]
pub enum RdscomEvent {
    StateChanged(RdscomLinkState),
    /// A request was acknowledged, `latency` after it was first sent.
    Acked {
        prototype: u8,
        number: u16,
        latency: Duration,
    },
    /// A request was resent (`attempt` 1..=retries).
    Resent {
        prototype: u8,
        number: u16,
        attempt: u32,
    },
    /// A request got no acknowledgement after every retry.
    Failed {
        prototype: u8,
        number: u16,
    },
    /// A request another thread sent was refused: it was not sent.
    Refused {
        prototype: String,
        reason: String,
    },
    /// A message from the MCU (requests it makes, responses that are not acks, errors).
    Received(Message),
}

/// A request waiting for its acknowledgement.
#[derive(Debug, Clone)]
struct Pending {
    prototype: u8,
    number: u16,
    bytes: Vec<u8>,
    first_sent: Instant,
    next_resend: Instant,
    resends: u32,
}

/// The rdscom link state machine.
#[derive(Debug)]
pub struct RdscomLink {
    config: RdscomConfig,
    decoder: FrameDecoder,
    next_number: u16,
    heartbeat_id: Option<u8>,
    next_heartbeat: Instant,
    last_heartbeat_ack: Option<Instant>,
    state: RdscomLinkState,
    pending: Vec<Pending>,
    outbox: VecDeque<Vec<u8>>,
    events: VecDeque<RdscomEvent>,
    heartbeat_rand: i8,
}

impl RdscomLink {
    pub fn new(config: RdscomConfig, table: PrototypeTable, now: Instant) -> RdscomLink {
        let heartbeat_id = table.by_name("Heartbeat").map(|prototype| prototype.id);
        RdscomLink {
            config,
            decoder: FrameDecoder::new(table),
            next_number: 1,
            heartbeat_id,
            next_heartbeat: now,
            last_heartbeat_ack: None,
            state: RdscomLinkState::Lost,
            pending: Vec::new(),
            outbox: VecDeque::new(),
            events: VecDeque::new(),
            heartbeat_rand: 0,
        }
    }

    pub fn table(&self) -> &PrototypeTable {
        self.decoder.table()
    }

    pub fn state(&self) -> RdscomLinkState {
        self.state
    }

    pub fn decoder_stats(&self) -> crate::protocol::rdscom::DecoderStats {
        self.decoder.stats()
    }

    /// The port vanished: nothing acknowledges heartbeats any more, so the link is lost at once
    /// (the timeout that would notice it does not run while the port is closed). A partial frame
    /// from before is dropped.
    pub fn handle_port_lost(&mut self) {
        self.decoder = FrameDecoder::new(self.decoder.table().clone());
        self.last_heartbeat_ack = None;
        self.set_state(RdscomLinkState::Lost);
    }

    /// The most requests that wait for their acknowledgement: past it a request is refused.
    pub const MAX_PENDING: usize = 64;

    /// Sends a request of prototype `name` with `values`; if the prototype requires it, the
    /// request is tracked for its acknowledgement. Past [`RdscomLink::MAX_PENDING`] waiting, a
    /// request is refused ([`RequestError::Busy`]), so that a flood builds no backlog; but a
    /// `Stop` always goes, and first: what waits to be written or acknowledged before it is
    /// given up (reported [`RdscomEvent::Failed`]). Returns the message number.
    pub fn request(&mut self, now: Instant, name: &str, values: Vec<Value>) -> Result<u16, RequestError> {
        let prototype = self.table().by_name(name).ok_or(EncodeError::UnknownPrototype(u8::MAX))?;
        let (id, ack) = (prototype.id, prototype.ack);
        if name == "Stop" {
            self.outbox.clear();
            for given_up in self.pending.drain(..) {
                self.events.push_back(RdscomEvent::Failed { prototype: given_up.prototype, number: given_up.number });
            }
        } else if ack && self.pending.len() >= Self::MAX_PENDING {
            return Err(RequestError::Busy { pending: self.pending.len() });
        }
        let number = self.next_number;
        let message = Message { kind: FrameType::Request, prototype: id, number, values };
        let mut bytes = Vec::with_capacity(32);
        encode(&message, self.decoder.table(), &mut bytes)?;
        self.next_number = self.next_number.wrapping_add(1).max(1);
        if ack {
            let next_resend = now + Duration::from_secs_f64(self.config.retry_timeout_s);
            self.pending.push(Pending {
                prototype: id,
                number,
                bytes: bytes.clone(),
                first_sent: now,
                next_resend,
                resends: 0,
            });
        }
        self.outbox.push_back(bytes);
        Ok(number)
    }

    /// Sends a request another thread sent ([`RdscomLink::request`]); one refused is told as
    /// [`RdscomEvent::Refused`].
    pub fn handle_request(&mut self, now: Instant, name: &str, values: Vec<Value>) {
        if let Err(error) = self.request(now, name, values) {
            self.events.push_back(RdscomEvent::Refused { prototype: name.to_owned(), reason: error.to_string() });
        }
    }

    /// Received bytes.
    pub fn handle_bytes(&mut self, now: Instant, bytes: &[u8]) {
        self.decoder.push(bytes);
        while let Some(message) = self.decoder.poll_message() {
            self.handle_message(now, message);
        }
    }

    fn handle_message(&mut self, now: Instant, message: Message) {
        match message.kind {
            FrameType::Response => {
                if Some(message.prototype) == self.heartbeat_id && self.heartbeat_number(message.number) {
                    self.last_heartbeat_ack = Some(now);
                    self.set_state(RdscomLinkState::Up);
                    return;
                }
                if let Some(index) = self.pending.iter().position(|pending| pending.number == message.number) {
                    let done = self.pending.swap_remove(index);
                    let latency = now - done.first_sent;
                    self.events.push_back(RdscomEvent::Acked {
                        prototype: done.prototype,
                        number: done.number,
                        latency,
                    });
                    // A response that carries data (MotorEvent, SensorDatastream) is news too.
                    if message.prototype != done.prototype {
                        self.events.push_back(RdscomEvent::Received(message));
                    }
                    return;
                }
                self.events.push_back(RdscomEvent::Received(message));
            }
            FrameType::Request => {
                // The MCU's own ack-required requests (ControlDone, Error) are acknowledged with a
                // response of the same number; a resend of one already seen is acknowledged again.
                let needs_ack = self.table().get(message.prototype).is_some_and(|prototype| prototype.ack);
                if needs_ack {
                    let ack = Message { kind: FrameType::Response, ..message.clone() };
                    let mut bytes = Vec::with_capacity(32);
                    if encode(&ack, self.decoder.table(), &mut bytes).is_ok() {
                        self.outbox.push_back(bytes);
                    }
                }
                self.events.push_back(RdscomEvent::Received(message));
            }
            FrameType::Error => self.events.push_back(RdscomEvent::Received(message)),
        }
    }

    /// Heartbeats are not tracked one by one: any acknowledged heartbeat number counts.
    fn heartbeat_number(&self, number: u16) -> bool {
        !self.pending.iter().any(|pending| pending.number == number)
    }

    fn set_state(&mut self, to: RdscomLinkState) {
        if self.state != to {
            self.state = to;
            self.events.push_back(RdscomEvent::StateChanged(to));
        }
    }

    fn heartbeat_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.config.heartbeat_period_s * f64::from(self.config.heartbeat_misses))
    }

    /// The earliest deadline: the next heartbeat, resend, or loss of the link.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let heartbeat = self.heartbeat_id.map(|_| self.next_heartbeat);
        let resend = self.pending.iter().map(|pending| pending.next_resend).min();
        let loss = match (self.state, self.last_heartbeat_ack) {
            (RdscomLinkState::Up, Some(last)) => Some(last + self.heartbeat_timeout()),
            _ => None,
        };
        [heartbeat, resend, loss].into_iter().flatten().min()
    }

    /// Acts on every deadline that has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == RdscomLinkState::Up
            && self.last_heartbeat_ack.is_some_and(|last| now >= last + self.heartbeat_timeout())
        {
            self.set_state(RdscomLinkState::Lost);
        }
        if let Some(id) = self.heartbeat_id.filter(|_| now >= self.next_heartbeat) {
            self.heartbeat_rand = self.heartbeat_rand.wrapping_add(37);
            let message = Message {
                kind: FrameType::Request,
                prototype: id,
                number: self.next_number,
                values: vec![Value::Int(i64::from(self.heartbeat_rand))],
            };
            self.next_number = self.next_number.wrapping_add(1).max(1);
            let mut bytes = Vec::with_capacity(16);
            if encode(&message, self.decoder.table(), &mut bytes).is_ok() {
                self.outbox.push_back(bytes);
            }
            let period = Duration::from_secs_f64(self.config.heartbeat_period_s);
            self.next_heartbeat += period;
            if self.next_heartbeat <= now {
                self.next_heartbeat = now + period;
            }
        }
        let retry = Duration::from_secs_f64(self.config.retry_timeout_s);
        let mut index = 0;
        while index < self.pending.len() {
            let pending = &mut self.pending[index];
            if now < pending.next_resend {
                index += 1;
                continue;
            }
            if pending.resends == self.config.retries {
                let failed = self.pending.swap_remove(index);
                self.events.push_back(RdscomEvent::Failed { prototype: failed.prototype, number: failed.number });
                continue;
            }
            pending.resends += 1;
            pending.next_resend = now + retry;
            self.outbox.push_back(pending.bytes.clone());
            let (prototype, number, attempt) = (pending.prototype, pending.number, pending.resends);
            self.events.push_back(RdscomEvent::Resent { prototype, number, attempt });
            index += 1;
        }
    }

    /// The next frame to write into `buf`; false when there is none.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> bool {
        match self.outbox.pop_front() {
            Some(bytes) => {
                buf.extend_from_slice(&bytes);
                true
            }
            None => false,
        }
    }

    pub fn poll_event(&mut self) -> Option<RdscomEvent> {
        self.events.pop_front()
    }
}

//! arduino_driver's topics: /joint_states (one joint per message, or under ros2_control every
//! joint once a round) and `~/temperature` from the MCU's datastream, `~/motor_event`,
//! `~/control_done` and `~/device_error` from its other messages, beside what every serial
//! device publishes.

use super::{joint_sample, motor_frame, track_link, ArduinoNodeConfig, JointRounds, JointSample};
use crate::drivers::rdscom::{DriverEvent, RdscomEvent};
use crate::msg::interfaces::{ControlDone, DeviceError, MotorEvent, RdscomMessage};
use crate::msg::{Header, JointState, Temperature};
use crate::nodes::link_health::LinkReport;
use crate::nodes::topics::serial_device::{DeviceTopics, SerialDeviceTopics};
use crate::outputs::{Outputs, Qos, Sink, SinkError, Topic};
use crate::protocol::rdscom::{Message, PrototypeTable};

#[derive(Debug)]
pub struct ArduinoTopics {
    joint_states: Topic<JointState>,
    temperature: Topic<Temperature>,
    motor_event: Topic<MotorEvent>,
    control_done: Topic<ControlDone>,
    device_error: Topic<DeviceError>,
    joint_names: Vec<String>,
    frame_prefix: String,
    table: PrototypeTable,
    /// Under ros2_control, whose topic-based hardware reads only whole states: the round being
    /// heard, published once every joint is.
    rounds: Option<JointRounds>,
}

impl ArduinoTopics {
    /// The topics of a driver on `port`, naming the MCU's joints and frames as `config` says,
    /// reading its messages with `table`.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        port: &str,
        config: &ArduinoNodeConfig,
        table: PrototypeTable,
    ) -> Result<SerialDeviceTopics<ArduinoTopics>, SinkError> {
        let device = ArduinoTopics {
            joint_states: out.topic("joint_states", Qos::STREAM)?,
            temperature: out.topic("~/temperature", Qos::STREAM)?,
            motor_event: out.topic("~/motor_event", Qos::EVENTS)?,
            control_done: out.topic("~/control_done", Qos::EVENTS)?,
            device_error: out.topic("~/device_error", Qos::EVENTS)?,
            joint_names: config.joint_names.clone(),
            frame_prefix: config.frame_prefix.clone(),
            table,
            rounds: config.ros2_control.then(JointRounds::default),
        };
        SerialDeviceTopics::advertise(out, device, super::LINK_STATUS, port)
    }

    /// A message from the MCU: a joint's sample, or one of its events.
    fn message<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64, message: &Message) -> Result<(), SinkError> {
        match RdscomMessage::of(Header::at(time_ns, ""), message, &self.table) {
            Some(RdscomMessage::MotorEvent(event)) => out.publish(self.motor_event, time_ns, &event)?,
            Some(RdscomMessage::ControlDone(done)) => out.publish(self.control_done, time_ns, &done)?,
            Some(RdscomMessage::DeviceError(error)) => out.publish(self.device_error, time_ns, &error)?,
            None => {}
        }
        match joint_sample(message, &self.table) {
            Some(sample) => self.joint(out, time_ns, &sample),
            None => Ok(()),
        }
    }

    /// One joint's sample; samples of joints without a name are not published.
    fn joint<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64, sample: &JointSample) -> Result<(), SinkError> {
        let Some(name) = self.joint_names.get(sample.joint) else { return Ok(()) };
        let header = Header::at(time_ns, "");
        let state = match &mut self.rounds {
            None => Some(JointState {
                header,
                name: vec![name.clone()],
                position: vec![sample.position],
                velocity: vec![sample.velocity.unwrap_or(0.0)],
                effort: vec![0.0],
            }),
            Some(rounds) => rounds.sample(sample).map(|round| JointState {
                header,
                name: self.joint_names.clone(),
                effort: vec![0.0; round.positions.len()],
                velocity: reported(&round.velocities, round.positions.len()),
                position: round.positions,
            }),
        };
        if let Some(state) = state {
            out.publish(self.joint_states, time_ns, &state)?;
        }
        match sample.temperature {
            Some(celsius) => {
                let temperature = Temperature {
                    header: Header::at(time_ns, &motor_frame(&self.frame_prefix, name)),
                    temperature: celsius,
                    variance: 0.0,
                };
                out.publish(self.temperature, time_ns, &temperature)
            }
            None => Ok(()),
        }
    }
}

impl DeviceTopics for ArduinoTopics {
    type Event = DriverEvent;

    fn track_link(health: &mut LinkReport, event: &DriverEvent) {
        track_link(health, event);
    }

    fn publish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64, event: &DriverEvent) -> Result<(), SinkError> {
        match event {
            DriverEvent::Link(RdscomEvent::Received(message)) => self.message(out, time_ns, message),
            _ => Ok(()),
        }
    }
}

impl RdscomMessage {
    /// MotorEvent, ControlDone, Error and LibraryError messages (by their prototype's name in
    /// `table`) as typed messages; None for the others, and for a message whose fields do not
    /// fit (a table that renamed them).
    pub fn of(header: Header, message: &Message, table: &PrototypeTable) -> Option<RdscomMessage> {
        let prototype = table.get(message.prototype)?;
        let field = |name: &str| message.field(table, name);
        let byte = |name: &str| field(name).and_then(|value| u8::try_from(value.as_f64() as i64).ok());
        match prototype.name.as_str() {
            "MotorEvent" => Some(RdscomMessage::MotorEvent(MotorEvent {
                header,
                motor_id: byte("motor_id")?,
                success: field("success")?.as_bool(),
                event_type: byte("event_type")?,
                event_value: field("event_value")?.as_f64(),
                num_in_queue: byte("num_in_queue")?,
                executed_with_count: byte("executed_with_count")?,
            })),
            "ControlDone" => Some(RdscomMessage::ControlDone(ControlDone {
                header,
                success: field("success")?.as_bool(),
                duration: field("time")?.as_f64() * 1e-3,
                executed: byte("executed")?,
            })),
            "Error" | "LibraryError" => {
                let error_code = byte("error_code")?;
                Some(RdscomMessage::DeviceError(DeviceError {
                    header,
                    prototype: message.prototype,
                    error_code,
                    description: format!("{} {error_code}", prototype.name),
                }))
            }
            _ => None,
        }
    }
}

/// Velocities as `/joint_states` has always carried them: 0 where the older table tells none
/// (its readers, topic_based_ros2_control among them, take a number a joint; the follower
/// takes none as unknown).
fn reported(velocities: &[f64], joints: usize) -> Vec<f64> {
    match velocities.len() == joints {
        true => velocities.to_vec(),
        false => vec![0.0; joints],
    }
}

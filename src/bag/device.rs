//! The device nodes' topics in a bag, as stm32_driver, arduino_driver and vr_bridge (follower)
//! publish them: their samples, stamped with the wall clock as the nodes stamp them, and their
//! status on /diagnostics on the nodes' schedule.

use std::time::Instant;

use super::arm::diagnostic_array;
use super::msgs::{
    DiagnosticArray, Header, Imu, JointState, Path, PointStamped, Pose, PoseStamped, Quaternion, Temperature, Vector3,
    Vector3Stamped,
};
use super::writer::{BagError, BagStats, BagWriter, Topic};
use super::{wall_clock_ns, Qos, Recorder};
use crate::drivers::stm32::ArmTelemetry;
use crate::nodes::arduino::{motor_frame, JointSample};
use crate::nodes::diagnostics::{Schedule, Status};
use crate::nodes::interfaces::{self, ControlDone, DeviceError, MotorEvent, RdscomMessage, Stm32Telemetry};
use crate::nodes::link_health::LinkHealth;
use crate::nodes::stm32::{imu_orientation, joint_state, IMU_ORIENTATION_COVARIANCE};
use crate::nodes::vr::VrNodeConfig;
use crate::protocol::deltavr::VrMessage;
use crate::protocol::rdscom::{Message, PrototypeTable};

/// What a device's recorder thread is handed.
#[derive(Debug)]
pub enum DeviceEvent<S> {
    Sample { time_ns: u64, sample: S },
    Status { time_ns: u64, status: Status },
}

/// A device node's recording: samples of type `S` as they come, and the node's status, which
/// goes to the bag when it is due (a second after the last, or at once on a change of level or
/// message), as the node publishes it.
#[derive(Debug)]
pub struct DeviceRecorder<S> {
    recorder: Recorder<DeviceEvent<S>>,
    status: Status,
    schedule: Schedule,
    link_health: Schedule,
}

impl<S: Send + 'static> DeviceRecorder<S> {
    /// Records into `bag` on a thread of its own: `topics` adds the device's topics there and
    /// returns how a sample is written; /diagnostics is added beside them.
    pub fn spawn<T, W>(bag: BagWriter, status: Status, topics: T) -> Result<DeviceRecorder<S>, BagError>
    where
        T: FnOnce(&mut BagWriter) -> Result<W, BagError> + Send + 'static,
        W: FnMut(&mut BagWriter, u64, S) -> Result<(), BagError>,
    {
        let recorder = Recorder::spawn(bag, move |bag| {
            let mut write_sample = topics(bag)?;
            let diagnostics = bag.topic::<DiagnosticArray>("/diagnostics", Qos::STREAM)?;
            Ok(move |bag: &mut BagWriter, event| match event {
                DeviceEvent::Sample { time_ns, sample } => write_sample(bag, time_ns, sample),
                DeviceEvent::Status { time_ns, status } => {
                    bag.write(diagnostics, time_ns, &diagnostic_array(time_ns, &status))
                }
            })
        })?;
        let mut recording = DeviceRecorder {
            recorder,
            status,
            schedule: Schedule::every_second(),
            link_health: Schedule::every_second(),
        };
        recording.report(|_| {});
        Ok(recording)
    }

    /// Records `sample`, received now. False once the recording has stopped.
    pub fn sample(&mut self, sample: S) -> bool {
        self.recorder.record(DeviceEvent::Sample { time_ns: wall_clock_ns(), sample })
    }

    /// Changes the status; records it when it is due.
    pub fn report(&mut self, change: impl FnOnce(&mut Status)) {
        change(&mut self.status);
        if self.schedule.due(&self.status, Instant::now()) {
            self.recorder.record(DeviceEvent::Status { time_ns: wall_clock_ns(), status: self.status.clone() });
        }
    }

    /// Records the link's `health` as the drivers publish `~/link_health` (see
    /// [`LinkHealth::due`]), as the sample `sample` makes of it.
    pub fn link_health(&mut self, health: &LinkHealth, sample: impl FnOnce(LinkHealth) -> S) {
        if health.due(&mut self.link_health, Instant::now()) {
            self.sample(sample(health.clone()));
        }
    }

    /// Records the last status and finishes the bag.
    pub fn finish(mut self) -> Result<BagStats, BagError> {
        self.recorder.record(DeviceEvent::Status { time_ns: wall_clock_ns(), status: self.status.clone() });
        self.recorder.finish()
    }
}

/// What stm32_driver publishes from: telemetry, and its link's health when it is due.
#[derive(Debug, Clone, PartialEq)]
pub enum Stm32Sample {
    Telemetry(ArmTelemetry),
    LinkHealth(LinkHealth),
}

/// stm32_driver's topics: /joint_states, `~/imu` and `~/telemetry` from telemetry, and
/// `~/link_health`.
#[derive(Debug)]
pub struct Stm32Topics {
    joint_states: Topic<JointState>,
    imu: Topic<Imu>,
    telemetry: Topic<Stm32Telemetry>,
    link_health: Topic<interfaces::LinkHealth>,
    joint_names: Vec<String>,
    imu_frame_id: String,
}

impl Stm32Topics {
    pub fn new(bag: &mut BagWriter, joint_names: Vec<String>, imu_frame_id: String) -> Result<Stm32Topics, BagError> {
        Ok(Stm32Topics {
            joint_states: bag.topic("/joint_states", Qos::STREAM)?,
            imu: bag.topic("/stm32_driver/imu", Qos::STREAM)?,
            telemetry: bag.topic("/stm32_driver/telemetry", Qos::STREAM)?,
            link_health: bag.topic("/stm32_driver/link_health", Qos::STREAM)?,
            joint_names,
            imu_frame_id,
        })
    }

    pub fn sample(&mut self, bag: &mut BagWriter, time_ns: u64, sample: &Stm32Sample) -> Result<(), BagError> {
        match sample {
            Stm32Sample::Telemetry(telemetry) => self.telemetry(bag, time_ns, telemetry),
            Stm32Sample::LinkHealth(health) => {
                bag.write(self.link_health, time_ns, &interfaces::LinkHealth::of(Header::at(time_ns, ""), health))
            }
        }
    }

    /// The joint states and the IMU sample in `telemetry`, where it has them, and all of it
    /// on `~/telemetry`.
    fn telemetry(&mut self, bag: &mut BagWriter, time_ns: u64, telemetry: &ArmTelemetry) -> Result<(), BagError> {
        if let Some((position, velocity)) = joint_state(telemetry) {
            let state = JointState {
                header: Header::at(time_ns, ""),
                name: self.joint_names.clone(),
                position: position.to_vec(),
                velocity: velocity.to_vec(),
                // The firmware reports no torque.
                effort: vec![0.0; 2],
            };
            bag.write(self.joint_states, time_ns, &state)?;
        }
        if let Some(sample) = &telemetry.imu {
            let [x, y, z, w] = imu_orientation(sample.roll, sample.pitch);
            let imu = Imu {
                header: Header::at(time_ns, &self.imu_frame_id),
                orientation: Quaternion { x, y, z, w },
                orientation_covariance: IMU_ORIENTATION_COVARIANCE,
                angular_velocity: Vector3::from(sample.gyro),
                angular_velocity_covariance: [0.0; 9],
                linear_acceleration: Vector3::from(sample.accel),
                linear_acceleration_covariance: [0.0; 9],
            };
            bag.write(self.imu, time_ns, &imu)?;
        }
        let typed = Stm32Telemetry::of(Header::at(time_ns, &self.imu_frame_id), telemetry);
        bag.write(self.telemetry, time_ns, &typed)
    }
}

/// What arduino_driver publishes from: a datastream's joint sample, the MCU's other messages,
/// and its link's health when it is due.
#[derive(Debug, Clone, PartialEq)]
pub enum ArduinoSample {
    Joint(JointSample),
    Message(Message),
    LinkHealth(LinkHealth),
}

/// arduino_driver's topics: /joint_states (one joint per message) and `~/temperature` from
/// datastream samples, `~/motor_event`, `~/control_done` and `~/device_error` from the MCU's
/// messages, and `~/link_health`.
#[derive(Debug)]
pub struct ArduinoTopics {
    joint_states: Topic<JointState>,
    temperature: Topic<Temperature>,
    motor_event: Topic<MotorEvent>,
    control_done: Topic<ControlDone>,
    device_error: Topic<DeviceError>,
    link_health: Topic<interfaces::LinkHealth>,
    joint_names: Vec<String>,
    table: PrototypeTable,
}

impl ArduinoTopics {
    pub fn new(
        bag: &mut BagWriter,
        joint_names: Vec<String>,
        table: PrototypeTable,
    ) -> Result<ArduinoTopics, BagError> {
        Ok(ArduinoTopics {
            joint_states: bag.topic("/joint_states", Qos::STREAM)?,
            temperature: bag.topic("/arduino_driver/temperature", Qos::STREAM)?,
            motor_event: bag.topic("/arduino_driver/motor_event", Qos::EVENTS)?,
            control_done: bag.topic("/arduino_driver/control_done", Qos::EVENTS)?,
            device_error: bag.topic("/arduino_driver/device_error", Qos::EVENTS)?,
            link_health: bag.topic("/arduino_driver/link_health", Qos::STREAM)?,
            joint_names,
            table,
        })
    }

    pub fn sample(&mut self, bag: &mut BagWriter, time_ns: u64, sample: &ArduinoSample) -> Result<(), BagError> {
        let header = Header::at(time_ns, "");
        match sample {
            ArduinoSample::Joint(joint) => self.joint(bag, time_ns, joint),
            ArduinoSample::Message(message) => match RdscomMessage::of(header, message, &self.table) {
                Some(RdscomMessage::MotorEvent(event)) => bag.write(self.motor_event, time_ns, &event),
                Some(RdscomMessage::ControlDone(done)) => bag.write(self.control_done, time_ns, &done),
                Some(RdscomMessage::DeviceError(error)) => bag.write(self.device_error, time_ns, &error),
                None => Ok(()),
            },
            ArduinoSample::LinkHealth(health) => {
                bag.write(self.link_health, time_ns, &interfaces::LinkHealth::of(header, health))
            }
        }
    }

    /// One joint's sample; samples of joints without a name are not published by the node.
    fn joint(&mut self, bag: &mut BagWriter, time_ns: u64, sample: &JointSample) -> Result<(), BagError> {
        let Some(name) = self.joint_names.get(sample.joint) else { return Ok(()) };
        let state = JointState {
            header: Header::at(time_ns, ""),
            name: vec![name.clone()],
            position: vec![sample.position],
            velocity: vec![sample.velocity.unwrap_or(0.0)],
            effort: vec![0.0],
        };
        bag.write(self.joint_states, time_ns, &state)?;
        match sample.temperature {
            Some(celsius) => {
                let temperature = Temperature {
                    header: Header::at(time_ns, &motor_frame(name)),
                    temperature: celsius,
                    variance: 0.0,
                };
                bag.write(self.temperature, time_ns, &temperature)
            }
            None => Ok(()),
        }
    }
}

/// vr_bridge's topics as a follower: what a Deltarobot leader sends, on the node's default
/// topic names, in its frame.
#[derive(Debug)]
pub struct VrFollowerTopics {
    position: Topic<PointStamped>,
    current_direction: Topic<Vector3Stamped>,
    desired_direction: Topic<Vector3Stamped>,
    curve: Topic<Path>,
    frame_id: String,
}

impl VrFollowerTopics {
    pub fn new(bag: &mut BagWriter, config: &VrNodeConfig) -> Result<VrFollowerTopics, BagError> {
        Ok(VrFollowerTopics {
            position: bag.topic(&config.position_topic, Qos::STREAM)?,
            current_direction: bag.topic(&config.current_direction_topic, Qos::STREAM)?,
            desired_direction: bag.topic(&config.desired_direction_topic, Qos::STREAM)?,
            curve: bag.topic(&config.curve_topic, Qos::LATCHED)?,
            frame_id: config.frame_id.clone(),
        })
    }

    /// One message from the leader; those the node does not publish are left out.
    pub fn message(&mut self, bag: &mut BagWriter, time_ns: u64, message: &VrMessage) -> Result<(), BagError> {
        let vector = |[x, y, z]: [f32; 3]| Vector3 { x: f64::from(x), y: f64::from(y), z: f64::from(z) };
        let stamped = |v: [f32; 3]| Vector3Stamped { header: Header::at(time_ns, &self.frame_id), vector: vector(v) };
        match message {
            VrMessage::ActuatorPosition(v) => {
                let point = PointStamped { header: Header::at(time_ns, &self.frame_id), point: vector(*v) };
                bag.write(self.position, time_ns, &point)
            }
            VrMessage::CurrentDirection(v) => bag.write(self.current_direction, time_ns, &stamped(*v)),
            VrMessage::DesiredDirection(v) => bag.write(self.desired_direction, time_ns, &stamped(*v)),
            VrMessage::Curve(points) => {
                let poses = points
                    .iter()
                    .map(|p| PoseStamped {
                        header: Header::at(time_ns, &self.frame_id),
                        pose: Pose { position: vector(*p), orientation: Quaternion::IDENTITY },
                    })
                    .collect();
                bag.write(self.curve, time_ns, &Path { header: Header::at(time_ns, &self.frame_id), poses })
            }
            _ => Ok(()),
        }
    }
}

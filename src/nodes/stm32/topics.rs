//! stm32_driver's topics: /joint_states (shoulder, elbow), `~/imu` and `~/telemetry` from each
//! telemetry packet, beside what every serial device publishes.

use super::{imu_orientation, joint_state, track_link, IMU_ORIENTATION_COVARIANCE};
use crate::drivers::stm32::{ArmTelemetry, DriverEvent, LinkEvent};
use crate::msg::interfaces::Stm32Telemetry;
use crate::msg::{Header, Imu, JointState, Quaternion, Vector3};
use crate::nodes::link_health::LinkReport;
use crate::nodes::topics::serial_device::{DeviceTopics, SerialDeviceTopics};
use crate::outputs::{Outputs, Qos, Sink, SinkError, Topic};

#[derive(Debug)]
pub struct Stm32Topics {
    joint_states: Topic<JointState>,
    imu: Topic<Imu>,
    telemetry: Topic<Stm32Telemetry>,
    joint_names: Vec<String>,
    imu_frame_id: String,
}

impl Stm32Topics {
    /// The topics of a driver on `port`, naming its joints `joint_names` (shoulder, elbow) and
    /// its IMU's frame `imu_frame_id`.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        port: &str,
        joint_names: Vec<String>,
        imu_frame_id: String,
    ) -> Result<SerialDeviceTopics<Stm32Topics>, SinkError> {
        let device = Stm32Topics {
            joint_states: out.topic("joint_states", Qos::STREAM)?,
            imu: out.topic("~/imu", Qos::STREAM)?,
            telemetry: out.topic("~/telemetry", Qos::STREAM)?,
            joint_names,
            imu_frame_id,
        };
        SerialDeviceTopics::advertise(out, device, super::LINK_STATUS, port)
    }

    /// The joint states and the IMU sample in `telemetry`, where it has them, and all of it on
    /// `~/telemetry`.
    fn telemetry<S: Sink>(
        &self,
        out: &mut Outputs<S>,
        time_ns: u64,
        telemetry: &ArmTelemetry,
    ) -> Result<(), SinkError> {
        if let Some((position, velocity)) = joint_state(telemetry) {
            let state = JointState {
                header: Header::at(time_ns, ""),
                name: self.joint_names.clone(),
                position: position.to_vec(),
                velocity: velocity.to_vec(),
                // The firmware reports no torque.
                effort: vec![0.0; 2],
            };
            out.publish(self.joint_states, time_ns, &state)?;
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
            out.publish(self.imu, time_ns, &imu)?;
        }
        let typed = Stm32Telemetry::of(Header::at(time_ns, &self.imu_frame_id), telemetry);
        out.publish(self.telemetry, time_ns, &typed)
    }
}

impl DeviceTopics for Stm32Topics {
    type Event = DriverEvent;

    fn track_link(health: &mut LinkReport, event: &DriverEvent) {
        track_link(health, event);
    }

    fn publish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64, event: &DriverEvent) -> Result<(), SinkError> {
        match event {
            DriverEvent::Link(LinkEvent::Telemetry(telemetry)) => self.telemetry(out, time_ns, telemetry),
            _ => Ok(()),
        }
    }
}

impl Stm32Telemetry {
    pub fn of(header: Header, telemetry: &ArmTelemetry) -> Stm32Telemetry {
        let imu = telemetry.imu.unwrap_or_default();
        Stm32Telemetry {
            header,
            device_time: telemetry.timestamp_ms.map_or(0.0, |ms| f64::from(ms) * 1e-3),
            device_time_valid: telemetry.timestamp_ms.is_some(),
            has_angles: telemetry.angles.is_some(),
            has_imu: telemetry.imu.is_some(),
            joint_positions: telemetry.angles.unwrap_or_default(),
            joint_velocities: telemetry.velocities.unwrap_or_default(),
            linear_acceleration: Vector3::from(imu.accel),
            angular_velocity: Vector3::from(imu.gyro),
            roll: imu.roll,
            pitch: imu.pitch,
        }
    }
}

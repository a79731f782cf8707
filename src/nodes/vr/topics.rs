//! vr_bridge's topics as a follower: what a Deltarobot leader sends (actuator position, both
//! directions, the latched curve) on the node's configured topics in its frame, and the link's
//! status on /diagnostics.

use super::{connecting, track_follower, VrNodeConfig};
use crate::bridge::vr::FollowerEvent;
use crate::msg::{Header, Path, PointStamped, Pose, PoseStamped, Quaternion, Vector3, Vector3Stamped};
use crate::nodes::status::Status;
use crate::nodes::topics::diagnostics::Diagnostics;
use crate::outputs::{Outputs, Publisher, Qos, Sink, SinkError, Topic};
use crate::protocol::deltavr::VrMessage;
use std::net::SocketAddr;

#[derive(Debug)]
pub struct VrFollowerTopics {
    position: Topic<PointStamped>,
    current_direction: Topic<Vector3Stamped>,
    desired_direction: Topic<Vector3Stamped>,
    curve: Topic<Path>,
    diagnostics: Diagnostics,
    frame_id: String,
    leader: SocketAddr,
}

impl VrFollowerTopics {
    /// The topics of a follower of the leader at `leader`, named as `config` says.
    pub fn advertise<S: Sink>(
        out: &mut Outputs<S>,
        config: &VrNodeConfig,
        leader: SocketAddr,
    ) -> Result<VrFollowerTopics, SinkError> {
        let mut status = Status::new(crate::nodes::vr::LINK_STATUS, &leader.to_string());
        connecting(&mut status, leader);
        Ok(VrFollowerTopics {
            position: out.topic(&config.position_topic, Qos::STREAM)?,
            current_direction: out.topic(&config.current_direction_topic, Qos::STREAM)?,
            desired_direction: out.topic(&config.desired_direction_topic, Qos::STREAM)?,
            curve: out.topic(&config.curve_topic, Qos::LATCHED)?,
            diagnostics: Diagnostics::advertise(out, status)?,
            frame_id: config.frame_id.clone(),
            leader,
        })
    }

    /// One message from the leader; those the node does not publish are left out.
    fn message<S: Sink>(&self, out: &mut Outputs<S>, time_ns: u64, message: &VrMessage) -> Result<(), SinkError> {
        let header = || Header::at(time_ns, &self.frame_id);
        let vector = |[x, y, z]: [f32; 3]| Vector3 { x: f64::from(x), y: f64::from(y), z: f64::from(z) };
        match message {
            VrMessage::ActuatorPosition(v) => {
                out.publish(self.position, time_ns, &PointStamped { header: header(), point: vector(*v) })
            }
            VrMessage::CurrentDirection(v) => {
                out.publish(self.current_direction, time_ns, &Vector3Stamped { header: header(), vector: vector(*v) })
            }
            VrMessage::DesiredDirection(v) => {
                out.publish(self.desired_direction, time_ns, &Vector3Stamped { header: header(), vector: vector(*v) })
            }
            VrMessage::Curve(points) => {
                let poses = points
                    .iter()
                    .map(|p| PoseStamped {
                        header: header(),
                        pose: Pose { position: vector(*p), orientation: Quaternion::IDENTITY },
                    })
                    .collect();
                out.publish(self.curve, time_ns, &Path { header: header(), poses })
            }
            _ => Ok(()),
        }
    }
}

impl Publisher for VrFollowerTopics {
    type Event = FollowerEvent;

    fn event<S: Sink>(
        &mut self,
        out: &mut Outputs<S>,
        time_ns: u64,
        event: Option<&FollowerEvent>,
    ) -> Result<(), SinkError> {
        if let Some(FollowerEvent::Message(message)) = event {
            self.message(out, time_ns, message)?;
        }
        let leader = self.leader;
        self.diagnostics.update(out, time_ns, |status| {
            if let Some(event) = event {
                track_follower(status, leader, event);
            }
        })
    }

    fn finish<S: Sink>(&mut self, out: &mut Outputs<S>, time_ns: u64) -> Result<(), SinkError> {
        self.diagnostics.publish(out, time_ns)
    }
}

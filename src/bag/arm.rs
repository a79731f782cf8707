//! The arm's topics recorded on a thread of their own: a run hands over frames, and the
//! messages (joint states and transforms worked out from each frame) are built and written
//! beside it.

use std::sync::Arc;

use super::{Recorder, RecordingError};
use crate::control::Trajectory;
use crate::hil::LoopStatus;
use crate::model::Robot;
use crate::nodes::diagnostics::Status;
use crate::nodes::joints::arm_joint_state;
use crate::nodes::robot_state::{Urdf, UrdfError, ARM_URDF};
use crate::nodes::topics::arm::{ArmTopicSet, ArmTopics};
use crate::nodes::topics::{NodeName, Outputs, Recording};
use crate::sim::{Frame, IdealTorques};

/// Why the arm's topics could not be recorded.
#[derive(Debug, thiserror::Error)]
pub enum ArmRecordingError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error("urdf/arm_hil.urdf")]
    Urdf(#[from] UrdfError),
}

/// What a run hands the arm's recorder thread.
#[derive(Debug, Clone)]
pub enum ArmEvent {
    /// A run of this trajectory begins (its path and ideal torques, where the node has them).
    Run { time_ns: u64, trajectory: Arc<Trajectory> },
    /// A published sample.
    Frame { time_ns: u64, frame: Frame },
    /// The node's status.
    Status { time_ns: u64, status: Status },
    /// The HIL loop's statistics.
    LoopStatistics { time_ns: u64, status: LoopStatus },
}

/// Records `node`'s arm topics (`set`, with robot_state_publisher's) into `bag` on a thread of
/// its own, /robot_description and /tf_static at `start_ns`; joint states and transforms are
/// worked out there from each frame, with `robot` and the running trajectory's elbow.
pub fn spawn_arm_recorder<R: Recording>(
    sink: R,
    robot: Robot,
    node: &str,
    set: ArmTopicSet,
    start_ns: u64,
) -> Result<Recorder<ArmEvent, R>, ArmRecordingError> {
    let urdf = Urdf::parse(ARM_URDF)?;
    let recorder = Recorder::spawn(sink, NodeName::new(node), move |out| {
        let mut arm = ArmTopics::advertise(out, set, "base_link", Some(&urdf))?;
        arm.start(out, start_ns)?;
        let mut elbow = robot.elbow();
        Ok(move |out: &mut Outputs<R>, event| match event {
            ArmEvent::Run { time_ns, trajectory } => {
                elbow = trajectory.elbow();
                let ideal = match set.run_outputs {
                    true => IdealTorques::new(&robot, &trajectory).map_while(Result::ok).collect(),
                    false => Vec::new(),
                };
                arm.run_started(out, time_ns, &trajectory, &ideal)?;
                // The latched path and ideal torques are most of a bag's bytes: out to the file
                // now, while the run goes on, rather than in its tail.
                out.sink_mut().flush()
            }
            ArmEvent::Frame { time_ns, frame } => {
                let joints = arm_joint_state(&robot, &frame, &elbow);
                arm.sample(out, time_ns, &frame, &joints)
            }
            ArmEvent::Status { time_ns, status } => arm.status(out, time_ns, &status),
            ArmEvent::LoopStatistics { time_ns, status } => arm.loop_statistics(out, time_ns, &status),
        })
    })?;
    Ok(recorder)
}

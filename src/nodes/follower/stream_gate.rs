//! A command stream after a stop: ros2_control's topic-based hardware sends its controllers'
//! commands every cycle, whatever became of the device, so the command in force when the device
//! stopped, or when something else (a goal) took it over, keeps coming. While that stream goes on
//! unbroken, its command is not followed again: the arm holds where it is until a command that
//! differs from it comes. A command sent after the stream paused ([`STREAM_GAP_S`]) is a command
//! sent anew (a person's, a script's), and is followed, whatever it says.
//!
//! Under ros2_control ([`StreamGate::of_ros2_control`]) the stream is the hardware plugin's alone:
//! it starts with the initial values the plugin is loaded with (0 rad where the URDF gives none),
//! written every cycle before any controller is active, and a pause is a stalled or restarted
//! controller manager, not a person. So the first command of the stream, and the first after any
//! pause, whatever it says, is taken as the one in force and not followed: the arm moves only
//! once a controller commands something else (joint_trajectory_controller's first command holds
//! the joints where their state is).

/// Two commands this close in every joint [rad] are the same command.
const SAME_RAD: f64 = 1e-9;

/// The longest pause between two commands of one stream [s]: a controller streams at its
/// update rate (tens to thousands of hertz), a person or a script sends again after longer.
pub const STREAM_GAP_S: f64 = 0.5;

/// Which commands of one stream are followed.
#[derive(Debug, Clone, Default)]
pub struct StreamGate {
    /// The stream's last command, followed or not, and when it came [s].
    last: Option<(Vec<f64>, f64)>,
    /// While closed, the command that is not followed again.
    stale: Option<Vec<f64>>,
    closed: bool,
    /// The stream is ros2_control's hardware plugin's: see the module's comment.
    of_ros2_control: bool,
}

/// Why a command of the stream is not followed.
pub const HELD: &str = "the command in force (after a stop or a takeover, the last one; under ros2_control, also the \
                    stream's first, at its start or after a pause) is not followed again while its stream goes on: \
                    the arm holds until a different command comes";

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a == b || (a - b).abs() <= SAME_RAD)
}

/// A command's `values` for its joints `names`, in the device's joint order (`joint_names`), as
/// the gate takes them: the same command with its joints listed in another order is the same
/// command. A joint it does not name, or names without a value, is infinite (never a command's
/// value, so never the same as one).
pub fn in_device_order(names: &[String], values: &[f64], joint_names: &[String]) -> Vec<f64> {
    joint_names
        .iter()
        .map(|joint| names.iter().position(|name| name == joint).and_then(|index| values.get(index)))
        .map(|value| value.copied().unwrap_or(f64::INFINITY))
        .collect()
}

impl StreamGate {
    /// The gate of ros2_control's topic-based hardware's stream: its first command, and the
    /// first after any pause, taken as the one in force.
    pub fn of_ros2_control() -> StreamGate {
        StreamGate { of_ros2_control: true, ..StreamGate::default() }
    }

    /// The device stopped or another command took it over: the stream's command in force now
    /// (and any that comes while the node takes none) is not followed again while it goes on.
    pub fn close(&mut self) {
        self.closed = true;
        self.stale = self.last.as_ref().map(|(positions, _)| positions.clone());
    }

    /// A command of the stream (`positions`, in the device's order) that came at `now_s` [s]
    /// while the node takes commands (`taking`) or not: whether it passes the gate (while the
    /// node takes none, the caller refuses it anyway), or why not.
    pub fn offer(&mut self, positions: &[f64], now_s: f64, taking: bool) -> Result<(), String> {
        let starts = self.last.as_ref().is_none_or(|(_, at)| now_s - at > STREAM_GAP_S);
        self.last = Some((positions.to_vec(), now_s));
        if self.of_ros2_control && starts {
            (self.closed, self.stale) = (true, None);
        }
        if !self.closed {
            return Ok(());
        }
        match (taking, self.stale.as_deref()) {
            (false, _) => {
                self.stale = Some(positions.to_vec());
                Ok(())
            }
            (true, None) if self.of_ros2_control => {
                self.stale = Some(positions.to_vec());
                Err(HELD.to_owned())
            }
            (true, Some(stale)) if !starts && same(stale, positions) => Err(HELD.to_owned()),
            (true, _) => {
                (self.closed, self.stale) = (false, None);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller's stream: 100 Hz.
    const PERIOD_S: f64 = 0.01;

    #[test]
    fn an_open_stream_is_followed() {
        let mut gate = StreamGate::default();
        assert_eq!(gate.offer(&[0.1, 0.2], 0.0, true), Ok(()));
        assert_eq!(gate.offer(&[0.1, 0.2], PERIOD_S, true), Ok(()));
    }

    #[test]
    fn after_a_stop_the_streams_command_in_force_is_not_followed_until_one_differs() {
        let mut gate = StreamGate::default();
        gate.offer(&[0.1, 0.2], 0.0, true).unwrap();
        gate.close();
        assert!(gate.offer(&[0.1, 0.2], PERIOD_S, true).is_err());
        assert!(gate.offer(&[0.1, 0.2], 2.0 * PERIOD_S, true).is_err(), "the stream repeats it: still held");
        assert_eq!(gate.offer(&[0.1, 0.3], 3.0 * PERIOD_S, true), Ok(()));
        assert_eq!(
            gate.offer(&[0.1, 0.2], 4.0 * PERIOD_S, true),
            Ok(()),
            "open again: the old one is a new command now"
        );
    }

    #[test]
    fn the_command_in_force_resent_with_its_joints_in_another_order_is_still_not_followed() {
        let device = ["shoulder".to_owned(), "elbow".to_owned()];
        let (listed, reordered) =
            (["shoulder".to_owned(), "elbow".to_owned()], ["elbow".to_owned(), "shoulder".to_owned()]);
        let mut gate = StreamGate::default();
        gate.offer(&in_device_order(&listed, &[0.1, 0.2], &device), 0.0, true).unwrap();
        gate.close();
        let again = in_device_order(&reordered, &[0.2, 0.1], &device);
        assert_eq!(again, vec![0.1, 0.2]);
        assert!(gate.offer(&again, PERIOD_S, true).is_err());
        let one_joint = in_device_order(&listed[..1], &[0.1], &device);
        assert_eq!(one_joint, vec![0.1, f64::INFINITY]);
        assert_eq!(gate.offer(&one_joint, 2.0 * PERIOD_S, true), Ok(()), "a command of one joint differs");
        assert!(gate.offer(&one_joint, 3.0 * PERIOD_S, true).is_ok());
        gate.close();
        assert!(gate.offer(&one_joint, 4.0 * PERIOD_S, true).is_err(), "the same joint unnamed is the same");
    }

    #[test]
    fn commands_streamed_while_the_node_takes_none_are_stale_too() {
        let mut gate = StreamGate::default();
        gate.close();
        assert_eq!(gate.offer(&[0.5], 0.0, false), Ok(()), "the node refuses it for being inactive");
        assert!(gate.offer(&[0.5], PERIOD_S, true).is_err(), "pending at re-activation: not followed");
        assert_eq!(gate.offer(&[0.6], 2.0 * PERIOD_S, true), Ok(()));
    }

    #[test]
    fn the_same_command_sent_anew_after_a_pause_is_followed() {
        let mut gate = StreamGate::default();
        gate.offer(&[0.1, 0.2], 0.0, true).unwrap();
        gate.close();
        assert_eq!(gate.offer(&[0.1, 0.2], 0.1 + STREAM_GAP_S, true), Ok(()), "a person sent it again");
    }

    #[test]
    fn with_no_command_before_the_stop_the_first_is_followed() {
        let mut gate = StreamGate::default();
        gate.close();
        assert_eq!(gate.offer(&[0.5], 0.0, true), Ok(()));
    }

    #[test]
    fn ros2_controls_initial_values_are_not_followed_until_a_controller_commands() {
        let mut gate = StreamGate::of_ros2_control();
        assert!(gate.offer(&[0.0, 0.0], 0.0, true).is_err(), "the plugin's initial value, before any controller");
        assert!(gate.offer(&[0.0, 0.0], PERIOD_S, true).is_err());
        assert!(gate.offer(&[0.0, 0.0], 5.0, true).is_err(), "a stalled controller manager is no person sending anew");
        assert_eq!(gate.offer(&[0.3, -0.2], 5.0 + PERIOD_S, true), Ok(()), "a controller holds where the arm is");
        assert_eq!(gate.offer(&[0.3, -0.2], 5.0 + 2.0 * PERIOD_S, true), Ok(()));
    }

    #[test]
    fn ros2_controls_initial_values_streamed_while_inactive_are_not_followed_at_activation() {
        let mut gate = StreamGate::of_ros2_control();
        assert_eq!(gate.offer(&[0.0], 0.0, false), Ok(()), "the node refuses it for being inactive");
        assert!(gate.offer(&[0.0], PERIOD_S, true).is_err());
        assert_eq!(gate.offer(&[0.4], 2.0 * PERIOD_S, true), Ok(()));
    }

    #[test]
    fn a_restarted_controller_managers_initial_values_are_not_followed() {
        let mut gate = StreamGate::of_ros2_control();
        gate.offer(&[0.0], 0.0, true).unwrap_err();
        gate.offer(&[0.4], PERIOD_S, true).unwrap();
        gate.offer(&[0.4], 2.0 * PERIOD_S, true).unwrap();
        assert!(gate.offer(&[0.0], 3.0, true).is_err(), "the new plugin's initial value, after the pause");
        assert_eq!(gate.offer(&[0.4], 3.0 + PERIOD_S, true), Ok(()), "the new JTC holds where the arm is");
    }

    #[test]
    fn under_ros2_control_a_pause_after_a_stop_does_not_make_the_command_in_force_new() {
        let mut gate = StreamGate::of_ros2_control();
        gate.offer(&[0.0], 0.0, true).unwrap_err();
        gate.offer(&[0.4], PERIOD_S, true).unwrap();
        gate.close();
        assert!(gate.offer(&[0.4], 10.0, true).is_err());
    }
}

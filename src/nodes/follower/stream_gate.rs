//! A command stream after a stop: ros2_control's topic-based hardware sends its controllers'
//! commands every cycle, whatever became of the device, so the command in force when the device
//! stopped, or when something else (a goal) took it over, keeps coming. That command is not
//! followed again: the arm holds where it is until a command that differs from it comes.

/// Two commands this close in every joint [rad] are the same command.
const SAME_RAD: f64 = 1e-9;

/// Which commands of one stream are followed.
#[derive(Debug, Clone, Default)]
pub struct StreamGate {
    /// The stream's last command, followed or not.
    last: Option<Vec<f64>>,
    /// While closed, the command that is not followed again.
    stale: Option<Vec<f64>>,
    closed: bool,
}

fn same(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| (a - b).abs() <= SAME_RAD)
}

impl StreamGate {
    /// The device stopped or another command took it over: the stream's command in force now
    /// (and any that comes while the node takes none) is not followed again.
    pub fn close(&mut self) {
        self.closed = true;
        self.stale = self.last.clone();
    }

    /// A command of the stream (`positions`, in the device's order) that came while the node
    /// takes commands (`taking`) or not: whether it is to be followed, or why not.
    pub fn offer(&mut self, positions: &[f64], taking: bool) -> Result<(), String> {
        self.last = Some(positions.to_vec());
        if !self.closed {
            return Ok(());
        }
        match (taking, self.stale.as_deref()) {
            (false, _) => {
                self.stale = self.last.clone();
                Ok(())
            }
            (true, Some(stale)) if same(stale, positions) => {
                Err("the command in force when the arm stopped or was taken over is not followed again: \
                 the arm holds until a different command comes"
                    .to_owned())
            }
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

    #[test]
    fn an_open_stream_is_followed() {
        let mut gate = StreamGate::default();
        assert_eq!(gate.offer(&[0.1, 0.2], true), Ok(()));
        assert_eq!(gate.offer(&[0.1, 0.2], true), Ok(()));
    }

    #[test]
    fn after_a_stop_the_command_in_force_is_not_followed_until_one_differs() {
        let mut gate = StreamGate::default();
        gate.offer(&[0.1, 0.2], true).unwrap();
        gate.close();
        assert!(gate.offer(&[0.1, 0.2], true).is_err());
        assert!(gate.offer(&[0.1, 0.2], true).is_err(), "the stream repeats it: still held");
        assert_eq!(gate.offer(&[0.1, 0.3], true), Ok(()));
        assert_eq!(gate.offer(&[0.1, 0.2], true), Ok(()), "open again: the old one is a new command now");
    }

    #[test]
    fn commands_sent_while_the_node_takes_none_are_stale_too() {
        let mut gate = StreamGate::default();
        gate.close();
        assert_eq!(gate.offer(&[0.5], false), Ok(()), "the node refuses it for being inactive");
        assert!(gate.offer(&[0.5], true).is_err(), "pending at re-activation: not followed");
        assert_eq!(gate.offer(&[0.6], true), Ok(()));
    }

    #[test]
    fn with_no_command_before_the_stop_the_first_is_followed() {
        let mut gate = StreamGate::default();
        gate.close();
        assert_eq!(gate.offer(&[0.5], true), Ok(()));
    }
}

"""arduino_driver: the finger testbench's MCU over rdscom, with robot_state_publisher
(urdf/finger_testbench.urdf), and optionally rviz2 and a recording.

    ros2 launch arm_hil arduino.launch.py stream_rate_hz:=100   # an Arduino or Teensy found by USB id
    ros2 launch arm_hil arduino.launch.py port:=/dev/ttyACM0 rviz:=true proximal_length:=0.05
    ros2 launch arm_hil arduino.launch.py control:=ros2_control   # controller_manager commands it

arduino_driver is a managed node (`ros2 lifecycle`): by default the launch configures and
activates it. It serves FollowJointTrajectory on /arduino_driver/follow_joint_trajectory; with
control:=ros2_control, ros2_control's joint_trajectory_controller serves it instead, on
/joint_trajectory_controller/follow_joint_trajectory (launch/control.py), and the node publishes
every joint once a datastream round and takes each command as a setpoint of the four joints.

`--show-args` lists every argument (launch/nodes.py has the bringup they share).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import Device, bringup  # noqa: E402

EXECUTABLE = "arduino_driver"
# The parameters a launch argument may set: name: (type, help).
OVERRIDES = {
    "port": (str, "serial device"),
    "link.baud": (int, "baud rate"),
    "link.heartbeat_misses": (int, "heartbeats unacknowledged in a row before the link is lost"),
    "stream_rate_hz": (int, "datastream rate [Hz]"),
    "autostart": (bool, "configure and activate at start (false: wait for ros2 lifecycle set)"),
    "auto_recover": (bool, "after a device fault, configure and activate again once a second"),
}
# What the bringup starts around the node (moveit.launch.py takes its URDF and lengths too).
DEVICE = Device(
    urdf="finger_testbench.urdf",
    rate="stream_rate_hz",
    frames={"frame_prefix": ""},
    rviz=("device.rviz", "arduino_driver"),
    lengths={
        "proximal_length": ("finger_proximal", "finger_joint2", 0.045, "proximal phalanx"),
        "middle_length": ("finger_middle", "finger_joint3", 0.025, "middle phalanx"),
        "distal_length": ("finger_distal", "finger_tip", 0.02, "distal phalanx"),
    },
    bag="arm_hil_arduino",
    controllers="finger_controllers.yaml",
)


def generate_launch_description():
    return bringup(EXECUTABLE, OVERRIDES, DEVICE)

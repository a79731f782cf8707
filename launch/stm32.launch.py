"""stm32_driver: the 2-DOF STM32 arm, with robot_state_publisher (urdf/stm32_arm.urdf), and
optionally rviz2 and a recording.

    ros2 launch arm_hil stm32.launch.py                      # the board found by its ST-LINK's USB id
    ros2 launch arm_hil stm32.launch.py port:=/dev/ttyACM0 rviz:=true upper_arm_length:=0.16
    ros2 launch arm_hil stm32.launch.py port:=/dev/ttyACM0 autostart:=false    # then ros2 lifecycle set
    ros2 launch arm_hil stm32.launch.py control:=ros2_control   # controller_manager commands it

stm32_driver is a managed node (`ros2 lifecycle`): by default the launch configures and
activates it. It serves FollowJointTrajectory on /stm32_driver/follow_joint_trajectory; with
control:=ros2_control, ros2_control's joint_trajectory_controller serves it instead, on
/joint_trajectory_controller/follow_joint_trajectory (launch/control.py).

`--show-args` lists every argument (launch/nodes.py has the bringup they share).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import Device, bringup  # noqa: E402

EXECUTABLE = "stm32_driver"
# The parameters a launch argument may set: name: (type, help).
OVERRIDES = {
    "port": (str, "serial device"),
    "link.baud": (int, "baud rate"),
    "link.poll_rate_hz": (float, "telemetry poll rate [Hz]"),
    "link.disconnected_after_s": (float, "silence before the link is lost and the node faults [s]"),
    "autostart": (bool, "configure and activate at start (false: wait for ros2 lifecycle set)"),
    "auto_recover": (bool, "after a device fault, configure and activate again once a second"),
}
# What the bringup starts around the node (moveit.launch.py takes its URDF and lengths too).
DEVICE = Device(
    urdf="stm32_arm.urdf",
    rate="link.poll_rate_hz",
    frames={"imu_frame_id": "stm32_imu_link"},
    rviz=("device.rviz", "stm32_driver"),
    lengths={
        "upper_arm_length": ("stm32_upper_arm", "stm32_elbow", 0.15, "shoulder to elbow"),
        "forearm_length": ("stm32_forearm", "stm32_imu", 0.12, "elbow to the IMU at the forearm's end"),
    },
    bag="arm_hil_stm32",
    controllers="stm32_controllers.yaml",
)


def generate_launch_description():
    return bringup(EXECUTABLE, OVERRIDES, DEVICE)

"""hil_node: the 1 kHz HIL loop on the simulated plant (default) or the lab's rig, with
robot_state_publisher, and optionally rviz2 and a recording.

    ros2 launch arm_hil hil.launch.py hardware:=robotscara sensor_device:=/dev/ttyUSB0 arduino_device:=auto
    ros2 launch arm_hil hil.launch.py rviz:=true record:=true bag:=/tmp/arm_hil_hil namespace:=a2

`--show-args` lists every argument (launch/nodes.py has the bringup they share).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import ARM, bringup  # noqa: E402


def generate_launch_description():
    return bringup("hil_node", {
        "hardware": (str, "sim or robotscara"),
        "sensor_device": (str, "angle sensor device"),
        "arduino_device": (str, "step-driver Arduino device, or auto"),
        "publish_rate_hz": (float, "publish rate [Hz]"),
        "hil.rate_hz": (float, "loop rate [Hz]"),
        "trajectory_file": (str, "trajectory CSV; empty = the built-in arc"),
        "autostart": (bool, "configure and activate at start (false: wait for ros2 lifecycle set)"),
        "auto_recover": (bool, "after a rig fault, configure and activate again once a second"),
        "auto_recover_protective_stop": (bool, "with auto_recover, activate again after a protective stop too"),
    }, ARM(bag="arm_hil_hil"))

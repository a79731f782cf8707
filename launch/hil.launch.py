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
        "hardware": ("sim", str, "sim or robotscara"),
        "sensor_device": ("/dev/ttyUSB0", str, "angle sensor device"),
        "arduino_device": ("auto", str, "step-driver Arduino device, or auto"),
        "publish_rate_hz": ("250.0", float, "publish rate [Hz]"),
        "hil.rate_hz": ("1000.0", float, "loop rate [Hz]"),
        "trajectory_file": ("", str, "trajectory CSV; empty = the built-in arc"),
        "autostart": ("true", bool, "configure and activate at start (false: wait for ros2 lifecycle set)"),
        "auto_recover": ("false", bool, "after a rig fault, configure and activate again once a second"),
        "auto_recover_protective_stop": ("false", bool, "with auto_recover, activate again after a protective stop too"),
    }, ARM(bag="arm_hil_hil"))

"""sil_node: the SIL simulator, with robot_state_publisher, and optionally rviz2 and a recording.

    ros2 launch arm_hil sil.launch.py rviz:=true
    ros2 launch arm_hil sil.launch.py record:=true bag:=/tmp/arm_hil_run rsp:=false
    ros2 launch arm_hil sil.launch.py namespace:=a1

`ros2 launch arm_hil sil.launch.py --show-args` lists every argument (launch/nodes.py has the
bringup they share with the other devices).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import ARM, bringup  # noqa: E402


def generate_launch_description():
    return bringup("sil_node", {
        "trajectory_file": (str, "trajectory CSV; empty = the built-in arc"),
        "real_time_factor": (float, "simulated s per wall s; 0 = as fast as possible"),
        "publish_rate_hz": (float, "publish rate [Hz]"),
        "publish_clock": (bool, "publish /clock from simulated time"),
        "loop": (bool, "repeat the trajectory"),
    }, ARM(config="sil.yaml", bag="arm_hil_sil"))

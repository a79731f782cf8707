"""legacy_bridge: the port-5555 server for the lab's GUI clients, republishing sessions, and
optionally a recording.

    ros2 launch arm_hil legacy_bridge.launch.py server_bind:=127.0.0.1:5555 hil_hardware:=sim
    ros2 launch arm_hil legacy_bridge.launch.py namespace:=lab record:=true

`--show-args` lists every argument (launch/nodes.py has the bringup they share).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import BRIDGE, bringup  # noqa: E402


def generate_launch_description():
    return bringup("legacy_bridge", {
        "server.bind": (str, "listening address"),
        "hil_hardware": (str, "\"\" (refuse H sessions), sim or robotscara"),
        "publish_rate_hz": (float, "publish rate [Hz]"),
    }, BRIDGE(bag="arm_hil_legacy"))

"""legacy_bridge: the port-5555 server for the lab's GUI clients, republishing sessions.

    ros2 launch arm_hil legacy_bridge.launch.py bind:=127.0.0.1:5555 hil_hardware:=sim
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import node_launch  # noqa: E402


def generate_launch_description():
    return node_launch("legacy_bridge", {
        "server.bind": ("127.0.0.1:5555", str, "listening address"),
        "hil_hardware": ("", str, "\"\" (refuse H sessions), sim or robotscara"),
        "publish_rate_hz": ("250.0", float, "publish rate [Hz]"),
    })

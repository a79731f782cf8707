"""vr_bridge: the Deltarobot VR link, leader for Unity (default) or follower.

    ros2 launch arm_hil vr_bridge.launch.py mode:=leader vr_bind:=0.0.0.0:7777
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import node_launch  # noqa: E402


def generate_launch_description():
    return node_launch("vr_bridge", {
        "mode": ("leader", str, "leader or follower"),
        "vr.bind": ("127.0.0.1:7777", str, "leader listening address"),
        "leader_address": ("127.0.0.1:7777", str, "the leader a follower connects to"),
        "vr.rate_hz": ("60.0", float, "stream rate [Hz]"),
    })

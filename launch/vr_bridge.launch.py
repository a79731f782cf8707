"""vr_bridge: the Deltarobot VR link, leader for Unity (default) or follower, and optionally a
recording.

    ros2 launch arm_hil vr_bridge.launch.py mode:=leader vr_bind:=0.0.0.0:7777
    ros2 launch arm_hil vr_bridge.launch.py namespace:=a1    # follows /a1/sil_node

As leader it follows the sil_node of its own namespace (its topics are relative:
sil_node/end_effector, ...); `position_topic:=hil_node/end_effector` follows a hil_node (which
publishes no directions or path).

`--show-args` lists every argument (launch/nodes.py has the bringup they share).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import BRIDGE, bringup  # noqa: E402


def generate_launch_description():
    return bringup("vr_bridge", {
        "mode": (str, "leader or follower"),
        "vr.bind": (str, "leader listening address"),
        "leader_address": (str, "the leader a follower connects to"),
        "vr.rate_hz": (float, "stream rate [Hz]"),
        "position_topic": (str, "actuator position (PointStamped) the leader streams"),
        "current_direction_topic": (str, "current direction (Vector3Stamped)"),
        "desired_direction_topic": (str, "desired direction (Vector3Stamped)"),
        "curve_topic": (str, "the curve (nav_msgs/Path, transient local)"),
    }, BRIDGE(bag="arm_hil_vr"))

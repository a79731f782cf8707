"""stm32_driver: the 2-DOF STM32 arm.

    ros2 launch arm_hil stm32.launch.py port:=/dev/ttyACM0
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import node_launch  # noqa: E402


def generate_launch_description():
    return node_launch("stm32_driver", {
        "port": ("/dev/ttyACM0", str, "serial device"),
        "link.baud": ("115200", int, "baud rate"),
        "link.poll_rate_hz": ("50.0", float, "telemetry poll rate [Hz]"),
    })

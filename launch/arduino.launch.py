"""arduino_driver: the finger testbench's MCU over rdscom.

    ros2 launch arm_hil arduino.launch.py port:=/dev/ttyACM0 stream_rate_hz:=100
"""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from nodes import node_launch  # noqa: E402


def generate_launch_description():
    return node_launch("arduino_driver", {
        "port": ("/dev/ttyACM0", str, "serial device"),
        "link.baud": ("115200", int, "baud rate"),
        "stream_rate_hz": ("50", int, "datastream rate [Hz]"),
    })

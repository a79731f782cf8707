#!/usr/bin/env bash
# A picture of a bringup in rviz, as the README shows it: the launch with rviz:=true on a virtual
# display (Xvfb, Mesa's software GL), left running for a while, then the screen saved as a PNG,
# cut to rviz's 3D view (the rows and columns of the light background arm_hil.rviz and device.rviz
# give it); with WHOLE=1, the whole screen (MoveIt's panel beside its view).
# Needs Xvfb and Python's Pillow (`python3 -m pip install pillow`), an underlay with rviz2, and a
# workspace where arm_hil is built (tests/ros/run.sh makes one). DDS stays on loopback.
#   ARM_HIL_ROS_ROOT=~/ros_jazzy ARM_HIL_ROS_WS=/tmp/ws_jazzy tools/rviz_screenshot.sh OUT.png [launch file] [seconds] [ARG:=VALUE ...]
# e.g. MoveIt's view of the STM32 arm against its emulator (`arm_hil emulate stm32` prints its port):
#   WHOLE=1 tools/rviz_screenshot.sh moveit.png moveit.launch.py 40 port:=/dev/pts/7
set -euo pipefail
set -m
root="${ARM_HIL_ROS_ROOT:?set ARM_HIL_ROS_ROOT to a ROS 2 installation with rviz2}"
ws="${ARM_HIL_ROS_WS:?set ARM_HIL_ROS_WS to a workspace where arm_hil is built}"
out="$(realpath -m "${1:?usage: tools/rviz_screenshot.sh OUT.png [launch file] [seconds] [ARG:=VALUE ...]}")"
launch_file="${2:-sil.launch.py}"
seconds="${3:-20}"
shift $(( $# < 3 ? $# : 3 ))
display=":$((90 + RANDOM % 9))"

exec unshare --net -- bash -c '
  set -euo pipefail
  set -m
  ip link set lo up multicast on
  set +u
  [ -f "$1/venv/bin/activate" ] && . "$1/venv/bin/activate"
  . "$1/install/setup.bash" 2>/dev/null || . "$1/setup.bash"
  . "$2/install/setup.bash"
  set -u
  [ -f "$1/cyclonedds_lo.xml" ] && export CYCLONEDDS_URI="file://$1/cyclonedds_lo.xml"
  export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_cyclonedds_cpp}" LIBGL_ALWAYS_SOFTWARE=1 DISPLAY="$4"
  Xvfb "$4" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
  display_server=$!
  trap "kill -INT -\$launched 2>/dev/null; sleep 3; kill -KILL -\$launched 2>/dev/null; kill \$display_server 2>/dev/null" EXIT
  sleep 2
  ros2 launch arm_hil "$5" rviz:=true "${@:7}" >/tmp/rviz_screenshot.log 2>&1 &
  launched=$!
  sleep "$6"
  python3 - "$4" "$3" "${WHOLE:-0}" <<"PY"
import sys
from PIL import Image, ImageGrab
screen = ImageGrab.grab(xdisplay=sys.argv[1]).convert("RGB")
if sys.argv[3] != "1":
    # The 3D view: the rows and columns mostly of the background colour of arm_hil.rviz and
    # device.rviz (236, 236, 236), which the shading of a panel may also have here and there.
    width, height = screen.size
    pixels = list(getattr(screen, "get_flattened_data", screen.getdata)())
    background = [pixel == (236, 236, 236) for pixel in pixels]
    rows = [sum(background[y * width:(y + 1) * width]) for y in range(height)]
    columns = [sum(background[x::width]) for x in range(width)]
    if max(rows) == 0:
        sys.exit("no 3D view on the screen: rviz did not start (see its launch log)")
    kept_rows = [y for y, count in enumerate(rows) if count >= max(rows) / 2]
    kept_columns = [x for x, count in enumerate(columns) if count >= max(columns) / 2]
    screen = screen.crop((kept_columns[0], kept_rows[0], kept_columns[-1] + 1, kept_rows[-1] + 1))
screen.save(sys.argv[2])
PY
  echo "saved $3 (the launch said: /tmp/rviz_screenshot.log)"
' bash "$root" "$ws" "$out" "$display" "$launch_file" "$seconds" "$@"

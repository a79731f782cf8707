#!/usr/bin/env bash
# A picture of a bringup in rviz, as the README shows it: the launch with rviz:=true on a virtual
# display (Xvfb, Mesa's software GL), left running for a while, then the screen saved as a PNG,
# cut to rviz's 3D view (the box of the background colour every rviz/*.rviz gives it); with
# WHOLE=1, the whole window (MoveIt's panel beside the view).
# Needs Xvfb and Python's Pillow (`python3 -m pip install pillow`), an underlay with rviz2, and a
# workspace where arm_hil is built (tests/ros/run.sh makes one). DDS stays on loopback.
#   ARM_HIL_ROS_ROOT=~/ros_jazzy ARM_HIL_ROS_WS=/tmp/ws_jazzy tools/rviz_screenshot.sh OUT.png [launch file] [seconds] [ARG:=VALUE ...]
# e.g. MoveIt's view of the STM32 arm against its emulator (`arm_hil emulate stm32` prints its port):
#   tools/rviz_screenshot.sh moveit.png moveit.launch.py 40 port:=/dev/pts/7
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
  trap "kill -INT -\$launched 2>/dev/null; sleep 3; kill -KILL -\$launched 2>/dev/null; kill %1 2>/dev/null" EXIT
  sleep 2
  ros2 launch arm_hil "$5" rviz:=true "${@:7}" >/tmp/rviz_screenshot.log 2>&1 &
  launched=$!
  sleep "$6"
  python3 - "$4" "$3" "${WHOLE:-0}" <<"PY"
import sys
from PIL import Image, ImageGrab
screen = ImageGrab.grab(xdisplay=sys.argv[1]).convert("RGB")
if sys.argv[3] != "1":
    # The 3D view: where the background colour of rviz/*.rviz (236, 236, 236) is.
    view = Image.new("L", screen.size)
    view.putdata([255 if pixel == (236, 236, 236) else 0 for pixel in screen.getdata()])
    box = view.getbbox()
    if box is None:
        sys.exit("no 3D view on the screen: rviz did not start (see its launch log)")
    screen = screen.crop(box)
screen.save(sys.argv[2])
PY
  echo "saved $3 (the launch said: /tmp/rviz_screenshot.log)"
' bash "$root" "$ws" "$out" "$display" "$launch_file" "$seconds" "$@"

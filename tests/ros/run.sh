#!/usr/bin/env bash
# The ROS 2 integration suite. Builds this package with colcon over the ROS 2 installation (or
# underlay) at $ARM_HIL_ROS_ROOT in a workspace of its own ($ARM_HIL_ROS_WS, a temporary one
# by default), then runs tests/ros/test_nodes.py in a network namespace that has only loopback.
#   ARM_HIL_ROS_ROOT=/path/to/underlay bash tests/ros/run.sh [unittest names...]
#   ARM_HIL_ROS_ROOT=/path/to/underlay bash tests/ros/run.sh --benchmark [security]
#   ARM_HIL_RMW=rmw_fastrtps_cpp ARM_HIL_ROS_ROOT=... bash tests/ros/run.sh    (default: Cyclone DDS)
# ARM_HIL_ROS_ROOT holds install/setup.bash, and venv/ and cyclonedds_lo.xml when it is an
# underlay built by tools/ros_underlay.sh; /opt/ros/jazzy or /opt/ros/humble work as well.
set -euo pipefail
set -m   # background jobs get SIGINT as in an interactive shell
root="${ARM_HIL_ROS_ROOT:?set ARM_HIL_ROS_ROOT to a ROS 2 installation}"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
ws="${ARM_HIL_ROS_WS:-$(mktemp -d -t arm_hil_ws.XXXXXX)}"

set +u   # ROS's setup scripts read unset variables
[ -f "$root/venv/bin/activate" ] && . "$root/venv/bin/activate"
. "$root/install/setup.bash" 2>/dev/null || . "$root/setup.bash"
set -u
# The middleware: ARM_HIL_RMW, else RMW_IMPLEMENTATION, else Cyclone DDS (the underlays build
# Fast DDS beside it with FASTDDS=1: rmw_fastrtps_cpp, the distros' default).
export RMW_IMPLEMENTATION="${ARM_HIL_RMW:-${RMW_IMPLEMENTATION:-rmw_cyclonedds_cpp}}"
echo "middleware: $RMW_IMPLEMENTATION"
[ -f "$root/cyclonedds_lo.xml" ] && export CYCLONEDDS_URI="file://$root/cyclonedds_lo.xml"

# tools/two_machines.sh, run by the security tests, builds its two machines from these.
export ARM_HIL_ROS_ROOT="$root" ARM_HIL_ROS_WS="$ws"
mkdir -p "$ws/src"
ln -sfn "$repo" "$ws/src/arm_hil"
echo "building arm_hil with colcon in $ws"
# CMake is told the Python that ROS runs on: Humble's interface generator would otherwise take the
# first python3.x on PATH.
(cd "$ws" && colcon build --packages-select arm_hil --event-handlers console_cohesion- status- \
  --cmake-args "-DPYTHON_EXECUTABLE=$(command -v python3)" >"$ws/build.log" 2>&1) \
  || { tail -40 "$ws/build.log"; exit 1; }
set +u
. "$ws/install/setup.bash"
set -u

# `--benchmark` runs tests/ros/follow_benchmark.py (docs/performance.md) in place of the suite,
# `--benchmark security` tests/ros/security_benchmark.py.
script=test_nodes.py
if [ "${1:-}" = --benchmark ]; then
  script=follow_benchmark.py; shift
  [ "${1:-}" != security ] || { script=security_benchmark.py; shift; }
fi

# DDS stays on this machine: a fresh network namespace with nothing but lo, and a /dev/shm of
# its own: Fast DDS's shared-memory transport finds its peers through /dev/shm, across network
# namespaces, and a killed process leaves its segments there; this one goes with the run.
exec unshare --net --mount -- bash -c 'mount -t tmpfs -o mode=1777 arm_hil_shm /dev/shm &&
  ip link set lo up multicast on && exec python3 "$0" "${@:1}"' "$repo/tests/ros/$script" "$@"

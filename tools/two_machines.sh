#!/usr/bin/env bash
# Two "machines" on one host, as docs/robot-pc.md's two-machine setup runs: two network
# namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2), each with a /dev/shm of its own
# (separate machines share no memory), nothing else. The robot PC runs sil_node; the laptop
# looks at it with the ros2 command line: its topics, /joint_states, a parameter, a lifecycle-free
# action goal. Needs root (ip netns) and a workspace where arm_hil is built.
#   ARM_HIL_ROS_ROOT=~/ros_jazzy ARM_HIL_ROS_WS=/tmp/ws_jazzy [RMW_IMPLEMENTATION=...] tools/two_machines.sh
# Extra environment for both machines (ROS_AUTOMATIC_DISCOVERY_RANGE=..., ROS_LOCALHOST_ONLY=1)
# passes through; the script prints what the laptop saw and exits 0 when it saw the robot.
set -euo pipefail
set -m
root="${ARM_HIL_ROS_ROOT:?set ARM_HIL_ROS_ROOT to a ROS 2 installation}"
ws="${ARM_HIL_ROS_WS:?set ARM_HIL_ROS_WS to a workspace where arm_hil is built (tests/ros/run.sh makes one)}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_cyclonedds_cpp}"
robot="arm_hil_robot_$$" laptop="arm_hil_laptop_$$"

cleanup() {
  ip netns pids "$robot" 2>/dev/null | xargs -r kill -INT 2>/dev/null || true
  sleep 2
  ip netns pids "$robot" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  ip netns pids "$laptop" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  ip netns del "$robot" 2>/dev/null || true
  ip netns del "$laptop" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$robot"
ip netns add "$laptop"
ip link add "veth_r$$" netns "$robot" type veth peer name "veth_l$$" netns "$laptop"
for side in "$robot:veth_r$$:10.77.0.1" "$laptop:veth_l$$:10.77.0.2"; do
  IFS=: read -r ns dev address <<<"$side"
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$address/24" dev "$dev"
  ip -n "$ns" link set "$dev" up multicast on
  ip -n "$ns" route add 224.0.0.0/4 dev "$dev"
done

# One machine's shell: its own /dev/shm, the underlay and the workspace sourced. Cyclone DDS
# takes the default configuration here (the veth is the machine's network, not loopback).
on() {
  local ns="$1"
  shift
  ip netns exec "$ns" unshare --mount -- bash -c '
    mount -t tmpfs -o mode=1777 machine_shm /dev/shm
    set +u
    [ -f "$0/venv/bin/activate" ] && . "$0/venv/bin/activate"
    . "$0/install/setup.bash" 2>/dev/null || . "$0/setup.bash"
    . "$1/install/setup.bash"
    set -u
    unset CYCLONEDDS_URI
    shift
    exec "$@"' "$root" "$ws" "$@"
}

echo "middleware: $RMW_IMPLEMENTATION; robot PC 10.77.0.1, laptop 10.77.0.2"
on "$robot" ros2 launch arm_hil sil.launch.py rsp:=false >"/tmp/two_machines_robot_$$.log" 2>&1 &
sleep 8
seen=0
echo "--- the laptop's ros2 topic list:"
on "$laptop" timeout 30 ros2 topic list --no-daemon | grep -E "joint_states|sil_node" || seen=1
echo "--- /joint_states, once:"
on "$laptop" timeout 30 ros2 topic echo --once --no-daemon /joint_states sensor_msgs/msg/JointState --field name \
  || seen=1
echo "--- its publish rate (ros2 topic hz, 5 s):"
rate=$(on "$laptop" timeout 8 ros2 topic hz /joint_states 2>&1 || true)
grep -m2 "average rate" <<<"$rate" || seen=1
echo "--- a parameter:"
on "$laptop" timeout 30 ros2 param get --no-daemon /sil_node publish_rate_hz || seen=1
echo "--- a FollowJointTrajectory goal that is refused (no joints named):"
on "$laptop" timeout 60 ros2 action send_goal /sil_node/follow_joint_trajectory \
  control_msgs/action/FollowJointTrajectory "{trajectory: {joint_names: [], points: []}}" | grep -E "ABORTED|error_string" \
  || seen=1
[ "$seen" = 0 ] && echo "the laptop saw the robot PC" || echo "the laptop did NOT see everything (robot's log: /tmp/two_machines_robot_$$.log)"
exit "$seen"

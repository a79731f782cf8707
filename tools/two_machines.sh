#!/usr/bin/env bash
# Two "machines" on one host, as docs/robot-pc.md's two-machine setup runs: two network
# namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2), each with a /dev/shm of its own
# (separate machines share no memory), nothing else. The robot PC runs sil_node; the laptop
# looks at it with the ros2 command line: its topics, /joint_states, a parameter, a lifecycle-free
# action goal. Needs root (ip netns) and a workspace where arm_hil is built.
#   ARM_HIL_ROS_ROOT=~/ros_jazzy ARM_HIL_ROS_WS=/tmp/ws_jazzy [RMW_IMPLEMENTATION=...] tools/two_machines.sh
# Extra environment for both machines (ROS_AUTOMATIC_DISCOVERY_RANGE=..., ROS_LOCALHOST_ONLY=1)
# passes through; the script prints what the laptop saw and exits 0 when it saw the robot.
# With KEYSTORE=DIR (docs/security.md; tools/sros2_keystore.sh makes DIR if it has no enclaves)
# the robot PC runs under `enclave:=/arm_hil`, Enforce; the laptop gets a keystore of its own
# holding only the operator's enclave, copied as docs/security.md copies it to a workstation, and
# runs the same commands in it; then an unsecured laptop must see an unsecured beacon the robot
# PC publishes beside the node, and none of the node's topics. (The robot PC uses all of DIR
# here; a real one holds only its own enclaves.)
set -euo pipefail
set -m
root="${ARM_HIL_ROS_ROOT:?set ARM_HIL_ROS_ROOT to a ROS 2 installation}"
ws="${ARM_HIL_ROS_WS:?set ARM_HIL_ROS_WS to a workspace where arm_hil is built (tests/ros/run.sh makes one)}"
export RMW_IMPLEMENTATION="${RMW_IMPLEMENTATION:-rmw_cyclonedds_cpp}"
# A tag of this run for the namespaces' and links' names, not the PID: inside a PID namespace
# (each worker of tests/ros/run.sh) PIDs are small and the same from run to run.
tag=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
robot="arm_hil_robot_$tag" laptop="arm_hil_laptop_$tag"
laptop_keystore=""

cleanup() {
  # the laptop's copy holds the operator's private key
  [ -z "$laptop_keystore" ] || rm -rf "$laptop_keystore"
  ip netns pids "$robot" 2>/dev/null | xargs -r kill -INT 2>/dev/null || true
  sleep 2
  ip netns pids "$robot" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  ip netns pids "$laptop" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
  ip netns del "$robot" 2>/dev/null || true
  ip netns del "$laptop" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$robot"
ip netns add "$laptop"
ip link add "veth_r$tag" netns "$robot" type veth peer name "veth_l$tag" netns "$laptop"
for side in "$robot:veth_r$tag:10.77.0.1" "$laptop:veth_l$tag:10.77.0.2"; do
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

robot_env=() laptop_env=() secured=""
if [ -n "${KEYSTORE:-}" ]; then
  [ -d "$KEYSTORE/enclaves" ] || on "$robot" bash "$(dirname "$0")/sros2_keystore.sh" "$KEYSTORE"
  laptop_keystore=$(mktemp -d)
  mkdir -p "$laptop_keystore/enclaves/arm_hil"
  cp -rL "$KEYSTORE/enclaves/arm_hil/operator" "$laptop_keystore/enclaves/arm_hil/"
  chmod -R go-rwx "$laptop_keystore"
  robot_env=(env "ROS_SECURITY_KEYSTORE=$KEYSTORE")
  laptop_env=(env ROS_SECURITY_ENABLE=true ROS_SECURITY_STRATEGY=Enforce "ROS_SECURITY_KEYSTORE=$laptop_keystore"
              ROS_SECURITY_ENCLAVE_OVERRIDE=/arm_hil/operator)
  secured="enclave:=/arm_hil"
fi

echo "middleware: $RMW_IMPLEMENTATION; robot PC 10.77.0.1, laptop 10.77.0.2${secured:+; secured, the laptop in /arm_hil/operator}"
on "$robot" "${robot_env[@]}" ros2 launch arm_hil sil.launch.py rsp:=false $secured >"/tmp/two_machines_robot_$tag.log" 2>&1 &
# Until the node has started (up to 30 s); the questions below are repeated until answered.
for _ in $(seq 60); do
  grep -q "sil_node.*process started" "/tmp/two_machines_robot_$tag.log" 2>/dev/null && break
  sleep 0.5
done
laptop() { on "$laptop" "${laptop_env[@]}" "$@"; }
# The laptop's `ros2` asks its daemon, which stays up and discovered between commands: run
# without it, Humble's command line waits 0.5 s for discovery, which DDS Security's handshakes
# can outlast. Each question is asked up to 10 times, 2 s apart, until the answer has `pattern`;
# the answer is printed.
ask() {
  local pattern="$1" answer
  shift
  for _ in $(seq 10); do
    answer=$("$@" 2>&1 || true)
    grep -qE "$pattern" <<<"$answer" && { echo "$answer"; return 0; }
    sleep 2
  done
  echo "$answer" | tail -3
  return 1
}
seen=0
echo "--- the laptop's ros2 topic list:"
ask "joint_states|sil_node" laptop timeout 30 ros2 topic list || seen=1
echo "--- /joint_states, once:"
ask "joint1" laptop timeout 30 ros2 topic echo --once /joint_states sensor_msgs/msg/JointState --field name || seen=1
echo "--- its publish rate, by the messages' stamps:"
# The stamps say when the node published, whatever the laptop's load did to their arrival; a
# message the laptop's echo missed makes one interval of 8 ms, which the median passes over (a
# reliable reader with a deep queue misses few). SIGINT, so that echo prints all it took.
# Read for 6 s, again up to twice while fewer than 51 came (the echo's own start and handshakes
# are in its 6 s).
for _ in 1 2 3; do
  stamps=$(laptop timeout -s INT 6 ros2 topic echo --qos-reliability reliable --qos-depth 5000 \
    /joint_states sensor_msgs/msg/JointState --field header.stamp 2>&1 || true)
  rate=$(awk '/^sec:/ { s = $2 } /^nanosec:/ { printf "%.9f\n", s + $2 / 1e9 }' <<<"$stamps" \
    | awk 'NR > 1 { printf "%.6f\n", $1 - previous } { previous = $1 }' | sort -n \
    | awk '{ interval[NR] = $1 } END { median = interval[int((NR + 1) / 2)]
        if (NR >= 50 && median > 0) printf "%.1f Hz (the median of %d intervals)\n", 1 / median, NR }')
  [ -z "$rate" ] || break
done
echo "${rate:-fewer than 51 messages in each of three reads of 6 s}"
# 250 Hz published: the median interval 4 ms
awk '{ exit !($1 > 225 && $1 < 275) }' <<<"${rate:-0}" || { echo "not 250 Hz"; seen=1; }
echo "--- a parameter:"
ask "Double value" laptop timeout 30 ros2 param get /sil_node publish_rate_hz || seen=1
echo "--- a FollowJointTrajectory goal that is refused (no joints named):"
ask "ABORTED|error_string" laptop timeout 60 ros2 action send_goal /sil_node/follow_joint_trajectory \
  control_msgs/action/FollowJointTrajectory "{trajectory: {joint_names: [], points: []}}" || seen=1
if [ -n "$secured" ]; then
  # An unsecured beacon beside the node: what the unsecured laptop must see, so that seeing
  # nothing of the node means security, not a network that carries nothing.
  on "$robot" env -u ROS_SECURITY_ENABLE -u ROS_SECURITY_STRATEGY -u ROS_SECURITY_KEYSTORE \
    -u ROS_SECURITY_ENCLAVE_OVERRIDE ros2 topic pub -r 2 /unsecured_beacon std_msgs/msg/String "{data: here}" \
    >/dev/null 2>&1 &
  # A daemon of its own: the one above has the operator's enclave.
  on "$laptop" ros2 daemon stop >/dev/null 2>&1 || true
  echo "--- an unsecured laptop's ros2 topic list (the beacon, and none of the node's topics):"
  listed=$(ask "unsecured_beacon" on "$laptop" env -u ROS_SECURITY_ENABLE -u ROS_SECURITY_STRATEGY \
    -u ROS_SECURITY_KEYSTORE -u ROS_SECURITY_ENCLAVE_OVERRIDE timeout 30 ros2 topic list) \
    || { echo "the unsecured laptop saw not even the beacon"; seen=1; }
  if grep -E "joint_states|sil_node" <<<"$listed"; then
    echo "an unsecured laptop saw the secured robot PC"; seen=1
  elif [ "$seen" = 0 ]; then
    echo "the beacon, none of the node's topics"
  fi
fi
[ "$seen" = 0 ] && echo "the laptop saw the robot PC" || echo "the laptop did NOT see everything (robot's log: /tmp/two_machines_robot_$tag.log)"
exit "$seen"

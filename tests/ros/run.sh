#!/usr/bin/env bash
# The ROS 2 integration suite. Builds this package with colcon over the ROS 2 installation (or
# underlay) at $ARM_HIL_ROS_ROOT in a workspace of its own ($ARM_HIL_ROS_WS, a temporary one
# by default), then runs tests/ros/test_nodes.py in network namespaces that have only loopback.
#   ARM_HIL_ROS_ROOT=/path/to/underlay bash tests/ros/run.sh [unittest names...]
#   ARM_HIL_ROS_ROOT=/path/to/underlay bash tests/ros/run.sh --benchmark [security]
#   ARM_HIL_RMW=rmw_fastrtps_cpp ARM_HIL_ROS_ROOT=... bash tests/ros/run.sh    (default: Cyclone DDS)
# ARM_HIL_CARGO_PROFILE names the cargo profile built (colcon-test for the suite, colcon for a
# benchmark), ARM_HIL_CARGO_TARGET_DIR a cargo target directory to build in.
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
# `--benchmark` runs tests/ros/follow_benchmark.py (docs/performance.md) in place of the suite,
# `--benchmark security` tests/ros/security_benchmark.py.
script=test_nodes.py
if [ "${1:-}" = --benchmark ]; then
  script=follow_benchmark.py; shift
  [ "${1:-}" != security ] || { script=security_benchmark.py; shift; }
fi

# CMake is told the Python that ROS runs on: Humble's interface generator would otherwise take the
# first python3.x on PATH. The tests' executables are built with cargo's colcon-test profile, a
# user's release build without its fat LTO and lightly optimised (Cargo.toml says why); a
# benchmark's with the `colcon` profile, what a user's build runs. ARM_HIL_CARGO_PROFILE names
# another.
# ARM_HIL_CARGO_TARGET_DIR names a cargo target directory that the workspaces of other distros
# share, one build after another (.ci/run's): the crates that bind no ROS are built once for
# all. Both options are given every time: CMake keeps them in the workspace's cache.
profile=colcon-test
[ "$script" = test_nodes.py ] || profile=colcon
profile="${ARM_HIL_CARGO_PROFILE:-$profile}"
echo "building arm_hil with colcon in $ws, cargo profile $profile"
# The tests' build links the system's zstd where pkg-config finds it (usual where rosbag2 is
# installed, whose compression uses it): its copy in the zstd-sys crate costs 14 s of CPU to
# build. (zstd-sys and what uses it are then built again when PKG_CONFIG_PATH changes, as it
# does from one distro to the other: some 10 s.)
if [ "$profile" = colcon-test ] && pkg-config --exists libzstd 2>/dev/null; then
  export ZSTD_SYS_USE_PKG_CONFIG=1
fi
built_from=$SECONDS
(cd "$ws" && colcon build --packages-select arm_hil --event-handlers console_cohesion- status- \
  --cmake-args "-DPYTHON_EXECUTABLE=$(command -v python3)" "-DARM_HIL_CARGO_PROFILE=$profile" \
  "-DARM_HIL_CARGO_TARGET_DIR=${ARM_HIL_CARGO_TARGET_DIR:-$ws/build/arm_hil/cargo}" >"$ws/build.log" 2>&1) \
  || { tail -40 "$ws/build.log"; echo "ros suite: not run: the colcon build failed"; exit 1; }
echo "built in $((SECONDS - built_from)) s"
set +u
. "$ws/install/setup.bash"
set -u

# DDS stays on this machine: a fresh network namespace with nothing but lo, and a /dev/shm of
# its own: Fast DDS's shared-memory transport finds its peers through /dev/shm, across network
# namespaces, and a killed process leaves its segments there; this one goes with the run. And
# pseudo-terminals of its own: a driver that retries the path of an emulator its test stopped
# would otherwise open the next worker's emulator, given the freed number.
# And processes of its own (a PID namespace): whatever a test started ends with it, even when
# the test's own cleanup never ran. It replaces the calling shell (exec), so that a background
# worker's process group is the namespace's, which a signal to the group reaches.
in_loopback_namespace() {
  exec unshare --net --mount --pid --fork --kill-child --mount-proc -- bash -c '
    mount -t tmpfs -o mode=1777 arm_hil_shm /dev/shm &&
    mount -t devpts -o newinstance,ptmxmode=0666 arm_hil_pts /dev/pts && mount --bind /dev/pts/ptmx /dev/ptmx &&
    ip link set lo up multicast on && exec "$@"' bash "$@"
}

# Named tests, or a benchmark, run in one namespace. The whole suite runs in
# ARM_HIL_ROS_WORKERS workers (4 by default) at once, each in a namespace and on a ROS domain
# of its own, each taking the next test class no worker has taken (test_nodes.py --claims):
# most of a test's time is waiting for a node, not computing.
if [ "$script" != test_nodes.py ] || [ $# -gt 0 ]; then
  # with ARM_HIL_ROS_BUSY_CORES's loops beside them, as the whole suite has (below); bounded,
  # should this shell be killed
  loops=()
  trap '[ ${#loops[@]} -eq 0 ] || kill "${loops[@]}" 2>/dev/null || true' EXIT
  for _ in $(seq 1 "${ARM_HIL_ROS_BUSY_CORES:-0}"); do
    timeout "${ARM_HIL_ROS_WORKER_BUDGET_S:-1500}" sh -c 'while :; do :; done' &
    loops+=($!)
  done
  status=0
  ( in_loopback_namespace python3 "$repo/tests/ros/$script" "$@" ) || status=$?
  exit "$status"
fi
# One compound command, read whole before it runs: an edit of this file mid-run changes nothing.
{
  workers="${ARM_HIL_ROS_WORKERS:-4}"
  [ "$workers" -ge 1 ] || { echo "ARM_HIL_ROS_WORKERS=$workers: at least one worker"; exit 2; }
  # A worker that outlives this (a test stuck past its own bounds) is stopped, and said.
  worker_budget_s="${ARM_HIL_ROS_WORKER_BUDGET_S:-1500}"
  claims=$(mktemp -d -t arm_hil_ros_claims.XXXXXX)
  logs=$(mktemp -d -t arm_hil_ros_workers.XXXXXX)
  pids=() busy=()
  # Whatever ends this script ends its workers (each in a process group of its own) and loops,
  # and an interrupted run still shows what its workers said so far.
  stop_started() {
    trap '' INT TERM
    if [ ${#pids[@]} -gt 0 ]; then
      # Each worker's tests stop what they started on SIGINT; what is left after 20 s goes with
      # its namespace.
      kill -INT -- "${pids[@]/#/-}" 2>/dev/null || true
      for _ in $(seq 1 40); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" -eq 1 ] || break
        sleep 0.5
      done
      kill -KILL -- "${pids[@]/#/-}" 2>/dev/null || true
    fi
    [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2>/dev/null || true
    wait || true
    if [ ${#pids[@]} -gt 0 ]; then
      for log in "$logs"/worker*.log; do echo "=== $log, as it was when the run was stopped:"; tail -40 "$log"; done
    fi
    rm -rf "$claims" "$logs"
  }
  trap stop_started EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  # ARM_HIL_ROS_BUSY_CORES=N runs N busy loops beside the suite, as a loaded robot PC or CI
  # machine would (docs/testing.md): a test that passes only on an idle machine shows here.
  for _ in $(seq 1 "${ARM_HIL_ROS_BUSY_CORES:-0}"); do
    timeout "$worker_budget_s" sh -c 'while :; do :; done' &
    busy+=($!)
  done
  expected=$(python3 "$repo/tests/ros/test_nodes.py" --count)
  suite_from=$SECONDS
  # The workers share the machine, but for tests on the emulated rig (test_nodes.py, take_the_machine).
  export ARM_HIL_ROS_MACHINE_LOCK="$claims/machine.lock"
  for worker in $(seq 1 "$workers"); do
    # timeout stays in the worker's process group (--foreground): a signal to it reaches the tests.
    ROS_DOMAIN_ID=$((40 + worker)) ARM_HIL_ROS_WORKER_BUDGET_S=$worker_budget_s in_loopback_namespace \
      timeout --foreground -s INT -k 30 "$worker_budget_s" \
      python3 -u "$repo/tests/ros/test_nodes.py" --claims "$claims" >"$logs/worker$worker.log" 2>&1 &
    pids+=($!)
  done
  failed=0
  for pid in "${pids[@]}"; do
    wait "$pid" || failed=1
  done
  pids=()
  total=0 passed=0 failures=0 skipped=0
  for worker in $(seq 1 "$workers"); do
    echo "=== worker $worker of $workers"
    cat "$logs/worker$worker.log"
    counts=$(sed -n 's/^ros: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p' "$logs/worker$worker.log")
    [ -n "$counts" ] || { echo "worker $worker ended without its verdict"; failed=1; continue; }
    read -r worker_passed worker_failed worker_skipped <<<"$counts"
    passed=$((passed + worker_passed)) failures=$((failures + worker_failed)) skipped=$((skipped + worker_skipped))
  done
  total=$((passed + failures + skipped))
  [ "$total" -eq "$expected" ] ||
    { echo "the workers ran $total tests of the suite's $expected (a class whose set-up failed runs none)"; failed=1; }
  echo "ros suite: $total tests, $passed passed, $failures failed, $skipped skipped (what this underlay lacks)," \
    "in $((SECONDS - suite_from)) s with $workers workers"
  exit "$failed"
}

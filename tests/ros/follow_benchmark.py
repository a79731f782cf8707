#!/usr/bin/env python3
"""FollowJointTrajectory figures (docs/performance.md): per node, how long from a goal's
sending to its first setpoint, and whether each goal succeeded with the RMS and largest joint
error along it (the feedback's `error`; for the parallel arm also the arm's own error: each
feedback's `desired` against the arm's joint states at the feedback's stamp), through the node's own `~/follow_joint_trajectory` and
through joint_trajectory_controller (`control:=ros2_control`, where ros2_control is installed),
on each middleware the underlay has; MoveIt's figures where it is built; and the rate of the
parallel arm's /joint_states as a subscriber gets them. A benchmark, not a test: it prints
Markdown tables and asserts nothing.

    tests/ros/run.sh --benchmark                      # every node
    tests/ros/run.sh --benchmark hil_node sil_node    # those nodes alone
    tests/ros/run.sh --benchmark --jtc-publish-rate-hz=1000 hil_node sil_node
                           # the parallel arm's bringups under JTC publishing at 1 kHz, not 250 Hz

Each middleware runs in a process of its own (`--one`, which prints its figures as JSON lines).
The first setpoint is timed on the wall clock from the goal's sending (its transport and
acceptance included):
- stm32_driver and arduino_driver: to the command's arrival at the emulated device, as
  `arm_hil emulate stm32 --print-targets` and `arm_hil emulate rdscom --print-controls` stamp it;
- sil_node and hil_node, natively: to the stamp of the first `~/controller_state` whose reference
  has left the hold, in a bringup of its own that publishes at 1 kHz (`publish_rate_hz:=1000`:
  every step of hil_node's loop; at the default 250 Hz the state every 4 ms would bound the
  figure, not time the step);
- through joint_trajectory_controller: to the stamp of the first command on the node's
  `~/joint_command` that differs from the one before: topic_based_ros2_control stamps a command
  as it writes it, on the wall clock. (Taken as this process receives them instead, the
  commands that queue up while it waits between goals put 0.1 - 0.2 s on each.)
The same first setpoint is also timed from the goal's acceptance, as the accepting node says it
on /rosout: our nodes' "goal UUID of N points, accepted at S s", stamped on the wall clock as
the goal's answer has gone out (before the node checks and plans it: that is in the figure);
joint_trajectory_controller's "Accepted new action goal", the line's own stamp, taken before
JTC answers and hands the goal to its next update (up to a control period, 4 ms, is in the
figure: it errs high). A goal whose line did not come is left out, and the count said.
"""

import argparse
import bisect
import itertools
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
import uuid

import rclpy
from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from control_msgs.action import FollowJointTrajectory
from control_msgs.msg import JointTrajectoryControllerState
from rcl_interfaces.msg import Log
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from test_follow_joint_trajectory import installed, joint_distance
from test_moveit import MOVEIT, joint_goal, move
from test_nodes import EXECUTABLES, LOGS, RUNNING, launch, stop_all

GOALS = 10
STM32 = ("stm32_shoulder", "stm32_elbow")
STM32_POSES = ([0.5, -0.3], [-0.3, 0.4])


def device_emulator(kind, flag):
    """The `kind` emulator printing its `flag` lines; its device path and the list the lines'
    times [ns, wall clock] go to."""
    process = subprocess.Popen([str(EXECUTABLES / "arm_hil"), "emulate", kind, flag],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    RUNNING.append(process)
    path = process.stdout.readline().strip()
    times = []
    threading.Thread(target=lambda: times.extend(json.loads(line)["unix_ns"] for line in process.stdout
                                                 if line.startswith("{")), daemon=True).start()
    return path, times


class Bench:
    def __init__(self):
        rclpy.init()
        self.node = rclpy.create_node("arm_hil_follow_benchmark")

    def goals(self, action, joints, poses, seconds=1.0, watched=None, states=None, way=None):
        """GOALS goals of `seconds` each, alternating between `poses`, after one, not counted,
        that brings the arm to the second from wherever it is (along `way`, the arm's own
        trajectory recorded as (stamp [ns], pose), where given: `way_along`); a placing that
        does not succeed ends the benchmark, whose goals would start elsewhere: each goal's id, its feedback
        errors [rad], whether it succeeded and its feedback's desired positions with their
        stamps; when each was sent (None for a goal not accepted) and when accepted [ns, wall clock: as the accepting node's
        /rosout line says it, `acceptance`, None where none came]; with `watched` (topic, type, value),
        `value(message)` of each message on the topic meanwhile; and with `states` (a JointState
        topic), each message's stamp [ns] and positions by joint name.
        Each goal's point gives its velocities (zero), as MoveIt's and most planners' do: a
        point of positions alone makes joint_trajectory_controller interpolate linearly, a
        step of velocity at the start and the end that no arm of bounded acceleration follows."""
        seen, arm, logs = [], [], []
        # rcl's /rosout QoS keeps 1000 lines: deep enough for a goal's.
        subscriptions = [self.node.create_subscription(
            Log, "/rosout", lambda m: logs.append((time_ns(m.stamp), m.msg)), 1000)]
        if watched is not None:
            topic, kind, value = watched
            # Deep enough for every message of the placing and the goals at 1 kHz (some 25 s):
            # the callbacks run only while this process spins and keep up with 1 kHz only just,
            # and a reader that drops its oldest messages dropped a goal's first setpoints (runs
            # timed them 310 and 850 ms late, the second with 20 s of depth).
            subscriptions.append(self.node.create_subscription(kind, topic, lambda m: seen.append(value(m)), 60000))
        if states is not None:
            subscriptions.append(self.node.create_subscription(
                JointState, states, lambda m: arm.append((stamp_ns(m.header), dict(zip(m.name, m.position)))), 1000))
        client = ActionClient(self.node, FollowJointTrajectory, action)
        if not client.wait_for_server(timeout_sec=30.0):
            raise RuntimeError(f"{action} is not served")
        runs, sent_ns = [], []

        def goal_to(pose, seconds):
            point = JointTrajectoryPoint(positions=list(pose), velocities=[0.0] * len(pose),
                                         time_from_start=Duration(sec=int(seconds)))
            return FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=list(joints), points=[point]))

        if not way:
            placing = goal_to(poses[1], 3.0)
        else:
            points = way_along(way, self.current_pose(joints), poses[1])
            placing = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=list(joints), points=points))
        placed = client.send_goal_async(placing)
        rclpy.spin_until_future_complete(self.node, placed, timeout_sec=10.0)
        if placed.result() is None or not placed.result().accepted:
            said = "no answer in 10 s" if placed.result() is None else "rejected"
            raise RuntimeError(f"{action}: the goal that places the arm was not accepted ({said})")
        placed_result = placed.result().get_result_async()
        rclpy.spin_until_future_complete(self.node, placed_result, timeout_sec=30.0)
        outcome = placed_result.result()
        if outcome is None or outcome.status != GoalStatus.STATUS_SUCCEEDED:
            said = "no result" if outcome is None else f"status {outcome.status}: {outcome.result.error_string}"
            raise RuntimeError(f"{action}: the goal that places the arm did not succeed ({said})")
        time.sleep(0.3)
        for index in range(GOALS):
            request = goal_to(poses[index % 2], seconds)
            feedback = []
            sent_ns.append(time.time_ns())
            sent = client.send_goal_async(request, feedback_callback=lambda m, f=feedback: f.append(m.feedback))
            rclpy.spin_until_future_complete(self.node, sent, timeout_sec=10.0)
            handle = sent.result()
            if handle is None or not handle.accepted:
                print(f"{action}: goal {index} {'not answered in 10 s' if handle is None else 'rejected'}",
                      file=sys.stderr, flush=True)
                runs.append((None, [], False, []))
                time.sleep(0.3)
                continue
            done = handle.get_result_async()
            rclpy.spin_until_future_complete(self.node, done, timeout_sec=seconds + 10.0)
            runs.append((str(uuid.UUID(bytes=bytes(handle.goal_id.uuid))),
                         [e for f in feedback for e in f.error.positions],
                         done.result() is not None and done.result().status == GoalStatus.STATUS_SUCCEEDED,
                         [(stamp_ns(f.header), list(f.joint_names), list(f.desired.positions)) for f in feedback]))
            time.sleep(0.3)
        # The callbacks lag behind a 1 kHz topic by seconds: what is still queued for them is
        # taken before the subscriptions go (the last goals' messages were lost so before).
        ended_ns, deadline = time.time_ns(), time.monotonic() + 30.0
        while time.monotonic() < deadline and any(
                taken is not None and (not taken or taken[-1][0] < ended_ns)
                for taken in (seen if watched else None, arm if states else None)):
            rclpy.spin_once(self.node, timeout_sec=0.05)
        if time.monotonic() >= deadline:
            print(f"{action}: messages of the last goals still queued after 30 s; the figures lack them",
                  file=sys.stderr, flush=True)
        client.destroy()
        for subscription in subscriptions:
            self.node.destroy_subscription(subscription)
        native = not action.startswith("/joint_trajectory_controller/")
        windows = zip(sent_ns, sent_ns[1:] + [math.inf])
        accepted_ns = [None if run[0] is None
                       else acceptance(logs, window, f"goal {run[0]} of ") if native
                       else acceptance(logs, window, "Accepted new action goal", by_stamp=True)
                       for run, window in zip(runs, windows)]
        # A goal not accepted has no first setpoint to time: it is left out.
        timed_ns = [None if run[0] is None else sent for run, sent in zip(runs, sent_ns)]
        return runs, timed_ns, accepted_ns, seen, arm

    def current_pose(self, joints, timeout_s=5.0):
        """Where `joints` are, by the next /joint_states."""
        got = []
        subscription = self.joint_poses(joints, lambda _, pose: got.append(pose), 10)
        deadline = time.monotonic() + timeout_s
        while not got and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        self.node.destroy_subscription(subscription)
        if not got:
            raise RuntimeError(f"no /joint_states within {timeout_s} s to place the arm from")
        return got[-1]

    def recording(self, joints, recorded):
        """Keeps each /joint_states of `joints` as (stamp [ns], pose) in `recorded` while this node
        spins, from now on (deep enough for 20 s at 250 Hz between spins); destroy it after."""
        return self.joint_poses(joints, lambda message, pose: recorded.append((stamp_ns(message.header), pose)), 5000)

    def joint_poses(self, joints, keep, depth):
        """A /joint_states subscription that calls `keep(message, pose)` with the positions of
        `joints` in their order, for each message that has them all."""
        def take(message):
            if set(joints) <= set(message.name):
                keep(message, [message.position[message.name.index(j)] for j in joints])
        return self.node.create_subscription(JointState, "/joint_states", take, depth)

    def rate(self, seconds=5.0):
        """/joint_states as this node receives them over `seconds` from the first: messages a
        second, and the longest gap between two [ms]."""
        stamps = []
        subscription = self.node.create_subscription(JointState, "/joint_states",
                                                     lambda _: stamps.append(time.monotonic()), 1000)
        deadline = time.monotonic() + 20.0
        while not stamps and time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        self.node.destroy_subscription(subscription)
        if len(stamps) < 2:
            return "no /joint_states"
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        return (f"/joint_states {(len(stamps) - 1) / (stamps[-1] - stamps[0]):.1f} messages/s, "
                f"longest gap {max(gaps) * 1e3:.1f} ms")

    def poses_of(self, joints, seconds=3.0, apart_rad=1.0):
        """Two poses the arm takes on its own trajectory, as far apart as it goes in `seconds` up
        to `apart_rad` on any joint: a goal of 1 s between them asks half the motors' 2 rad/s on
        average, a spline from rest three quarters of it at its fastest."""
        poses = []
        subscription = self.joint_poses(joints, lambda _, pose: poses.append(pose), 50)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        self.node.destroy_subscription(subscription)
        distance = [max(abs(a - b) for a, b in zip(pose, poses[0])) for pose in poses]
        within = [d if d <= apart_rad else -1.0 for d in distance]
        return poses[0], poses[within.index(max(within))]


def errors(runs):
    """The goals' figures: how many succeeded, and the RMS and largest joint error [mrad]."""
    all_errors = [e for _, run_errors, _, _ in runs for e in run_errors]
    rms, largest = rms_and_max(all_errors)
    return {"succeeded": sum(ok for _, _, ok, _ in runs), "goals": len(runs), "rms_mrad": rms, "max_mrad": largest,
            "samples": len(all_errors)}


def rms_and_max(errors):
    """The RMS and the largest of `errors` [rad], in mrad."""
    if not errors:
        return float("nan"), float("nan")
    return math.sqrt(sum(e * e for e in errors) / len(errors)) * 1e3, max(abs(e) for e in errors) * 1e3


def arm_errors(runs, states):
    """The arm's own error along the goals [mrad, RMS and largest]: each feedback's desired
    positions against the arm's joint states (`states`, stamped) interpolated at the feedback's
    stamp. The same measure on either path, where the feedback's `error` differs: the node's own
    compares with the state of the same step, joint_trajectory_controller's with the last state
    its hardware plugin received (up to a publish period and the transport old)."""
    states = sorted(states, key=lambda state: state[0])
    times = [t for t, _ in states]
    errors = []
    for _, _, _, desired in runs:
        for stamp, names, positions in desired:
            after = bisect.bisect_right(times, stamp)
            if not 0 < after < len(times) or times[after] - times[after - 1] > 50_000_000:
                continue
            (t0, before), (t1, later) = states[after - 1], states[after]
            s = (stamp - t0) / (t1 - t0) if t1 > t0 else 0.0
            errors += [want - (before[name] + s * (later[name] - before[name]))
                       for name, want in zip(names, positions) if name in before and name in later]
    rms, largest = rms_and_max(errors)
    return {"arm_rms_mrad": rms, "arm_max_mrad": largest, "arm_samples": len(errors)}


ACCEPTED_AT = re.compile(r"accepted at (\d+)\.(\d{9}) s")


# The placing goal's fastest joint speed [rad/s]: half the motors' 2 rad/s.
PLACING_RAD_S = 1.0


def way_along(recorded, start, end, spacing_s=0.25, slower=1.5):
    """Points of a goal along the arm's own `recorded` trajectory ((stamp [ns], pose)), from its
    pose nearest `start` to its pose nearest `end`, one every `spacing_s` of it, `slower` times
    as slow as the arm went and no faster than PLACING_RAD_S, positions alone: joint_trajectory_controller and the nodes then
    move along lines between poses a quarter second of the arm's trajectory apart, which keep
    to the forearm's sphere (docs/hil.md), where one line from `start` to `end` may not."""
    def nearest(pose):
        return min(range(len(recorded)), key=lambda i: joint_distance(recorded[i][1], pose))
    first, last = nearest(start), nearest(end)
    # The recording (250 Hz) passes within a few milliradians of any pose the arm held along it.
    for pose, index in ((start, first), (end, last)):
        if joint_distance(recorded[index][1], pose) > 0.02:
            raise RuntimeError(f"the arm's recorded trajectory ({len(recorded)} poses) does not pass {pose}: "
                               f"nearest {joint_distance(recorded[index][1], pose):.3f} rad away")
    step = 1 if last >= first else -1
    kept = [first]
    for index in range(first + step, last + step, step):
        if abs(recorded[index][0] - recorded[kept[-1]][0]) >= spacing_s * 1e9 or index == last:
            kept.append(index)
    points, at_s = [], 0.5
    for before, index in zip([first] + kept, kept):
        # No faster than PLACING_RAD_S between two points, whatever the recording holds (a run
        # on Fast DDS once recorded a jump that asked 2.7 rad/s of the motors' 2).
        at_s += max(slower * abs(recorded[index][0] - recorded[before][0]) * 1e-9,
                    joint_distance(recorded[index][1], recorded[before][1]) / PLACING_RAD_S)
        points.append(JointTrajectoryPoint(positions=list(recorded[index][1]),
                                           time_from_start=Duration(sec=int(at_s), nanosec=int(at_s % 1 * 1e9))))
    return points


def acceptance(logs, window, text, by_stamp=False):
    """When a goal was accepted [ns]: of the /rosout `logs` (stamp, text) stamped within `window`
    (its sending, the next goal's) [ns], the first that holds `text`, by the time it says it
    was accepted at (our nodes' line, written after the goal's check and first setpoint), or
    `by_stamp`, by the line's stamp (joint_trajectory_controller's, stamped as it accepts);
    None if no such line came."""
    sent, until = window
    line = next((line for line in sorted(logs) if sent <= line[0] < until and text in line[1]), None)
    if line is None:
        return None
    said = ACCEPTED_AT.search(line[1])
    if said:
        return int(said[1]) * 1_000_000_000 + int(said[2])
    return line[0] if by_stamp else None


def first_setpoints(sent, accepted, times):
    """The first of `times` [ns] after each goal's sending (`sent`, None for a goal left out),
    from its sending and from its acceptance (`accepted`, None where unknown): medians and
    maxima [ms]."""
    firsts = [None if when is None else next((t for t in times if t >= when), None) for when in sent]

    def median_and_max(starts):
        delays = sorted((first - start) * 1e-6 for first, start in zip(firsts, starts)
                        if first is not None and start is not None)
        return [delays[len(delays) // 2], delays[-1], len(delays)] if delays else None
    return {"first_ms": median_and_max(sent), "first_from_acceptance_ms": median_and_max(accepted)}


def changes(seen):
    """The times [ns] of the (time, positions) pairs whose positions differ from the pair's before."""
    return [t for (_, before), (t, positions) in zip(seen, seen[1:]) if positions != before]


def cpu_seconds(group):
    """The CPU time [s] the processes of process group `group` have used so far (a launch's
    group: the nodes and everything it started)."""
    ticks = 0
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group:  # pgrp; then utime and stime at 12 and 13
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def stamp_ns(header):
    return time_ns(header.stamp)


def time_ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


JTC_ACTION = "/joint_trajectory_controller/follow_joint_trajectory"


def controls():
    """The paths to measure: the node's own action, and JTC's where ros2_control is installed."""
    with_jtc = all(installed(package) for package in ("controller_manager", "topic_based_ros2_control"))
    return ["native", "ros2_control"] if with_jtc else ["native"]


def label(node, control):
    return f"{node}, native" if control == "native" else f"{node} via joint_trajectory_controller"


def launched(file, control, *arguments):
    """`file` launched with `control:=`; the controllers are active some seconds after the start
    (the controller manager reads the URDF from robot_state_publisher on Jazzy). Its log is
    kept as LOGS/FILE_CONTROL.log once it is stopped (`ended`)."""
    native = control == "native"
    node = launch(file, f"control:={control}", "rsp:=false" if native else "rsp:=true", *arguments)
    node.kept_as = LOGS / f"{file.replace('.launch.py', '')}_{control}.log"
    time.sleep(3.0 if native else 8.0)
    return node


def ended(node):
    """Stops what the benchmark started, keeping `node`'s log."""
    stop_all()
    node.log_path.replace(node.kept_as)


def moveit_figures(bench):
    """MoveIt on the STM32 arm (launch/moveit.launch.py), where it is installed: GOALS joint
    goals between the two poses, planned and executed; the planning time move_group reports,
    and the time from the request to its result (the arm there)."""
    for control in controls() if MOVEIT else []:
        path, _ = device_emulator("stm32", "--print-targets")
        node = launched("moveit.launch.py", control, "device:=stm32", f"port:={path}")
        planning, arrival = [], []
        for index in range(GOALS):
            result, took = move(bench.node, joint_goal("arm", dict(zip(STM32, STM32_POSES[index % 2]))))
            if result is not None and result.error_code.val == 1:  # MoveItErrorCodes.SUCCESS
                planning.append(result.planning_time)
                arrival.append(took)
        planning.sort()
        arrival.sort()
        ended(node)
        yield {"moveit": control, "succeeded": len(planning), "goals": GOALS,
               "planning_ms": planning[len(planning) // 2] * 1e3 if planning else None,
               "arrival_s": arrival[len(arrival) // 2] if arrival else None}


def serial_figures(bench, nodes):
    """stm32_driver and arduino_driver (those of `nodes`) on their emulators, natively and
    through JTC."""
    fingers = ("finger_joint0", "finger_joint1", "finger_joint2", "finger_joint3")
    devices = [("stm32_driver", "stm32.launch.py", ("stm32", "--print-targets"), STM32, STM32_POSES),
               ("arduino_driver", "arduino.launch.py", ("rdscom", "--print-controls"), fingers,
                ([0.1, 0.5, 0.6, 0.4], [-0.1, 0.9, 0.3, 0.2]))]
    for name, file, emulator, joints, poses in devices:
        for control in controls() if name in nodes else []:
            path, commands = device_emulator(*emulator)
            node = launched(file, control, f"port:={path}")
            native = control == "native"
            runs, sent, accepted, _, _ = bench.goals(f"/{name}/follow_joint_trajectory" if native else JTC_ACTION,
                                                     joints, poses)
            ended(node)
            yield {"node": name, "control": control, **errors(runs), **first_setpoints(sent, accepted, commands)}


def arm_figures(bench, nodes, jtc_publish_rate_hz=None):
    """sil_node and hil_node (the simulated rig; those of `nodes`), natively and through JTC
    (its bringup at `jtc_publish_rate_hz`, if given), and their /joint_states' rate."""
    arm = ("joint1", "joint2", "joint3")
    for name, file, arguments in [("sil_node", "sil.launch.py", []), ("hil_node", "hil.launch.py", ["hardware:=sim"])]:
        poses, way = None, []
        for control in controls() if name in nodes else []:
            native = control == "native"
            rate_hz = [] if native or jtc_publish_rate_hz is None else [f"publish_rate_hz:={jtc_publish_rate_hz}"]
            # The arm's own trajectory from its start, to place it along: under JTC the arm holds
            # where it was when the controller became active, early in the node's start-up arc,
            # far along it from the poses taken later (a joint-space line between them would
            # leave the forearm's sphere by centimetres, which hil_node refuses).
            recorder = bench.recording(arm, way) if poses is None else None
            node = launched(file, control, *arguments, *rate_hz)
            # Its /joint_states (250 Hz by default) as a subscriber gets them.
            rate = bench.rate() if native else None
            # Two poses of the arm's own trajectory, seen before JTC holds it (the same each start);
            # hil_node's 1 s apart, for a joint-space goal between them to keep within 1 cm of
            # the forearm's sphere (docs/hil.md).
            poses = poses or bench.poses_of(arm, seconds=1.0 if name == "hil_node" else 3.0)
            if recorder is not None:
                bench.node.destroy_subscription(recorder)
            if native:
                watched = (f"/{name}/controller_state", JointTrajectoryControllerState,
                           lambda m: (stamp_ns(m.header), list(m.reference.positions)))
            else:
                watched = (f"/{name}/joint_command", JointState, lambda m: (stamp_ns(m.header), list(m.position)))
            (cpu_from, wall_from) = (cpu_seconds(node.pid), time.monotonic())
            # The node's own joint states: under ros2_control, those its hardware plugin reads.
            states = "/joint_states" if native else f"/{name}/hardware/joint_states"
            action = f"/{name}/follow_joint_trajectory" if native else JTC_ACTION
            runs, sent, accepted, seen, arm_states = bench.goals(action, arm, poses, watched=watched, states=states,
                                                                 way=way)
            # The bringup's CPU while the goals ran, in percent of one core.
            cpu = 100.0 * (cpu_seconds(node.pid) - cpu_from) / (time.monotonic() - wall_from)
            ended(node)
            if native:
                # The first setpoints again, timed by a controller_state of every 1 ms step.
                node = launched(file, control, *arguments, "publish_rate_hz:=1000")
                node.kept_as = node.kept_as.with_name(node.kept_as.stem + "_1khz.log")
                _, sent, accepted, seen, _ = bench.goals(action, arm, poses, watched=watched, way=way)
                ended(node)
            yield {"node": name, "control": control, **errors(runs), **arm_errors(runs, arm_states),
                   "rate": rate, "cpu_percent": cpu, **first_setpoints(sent, accepted, changes(seen))}


NODES = ("stm32_driver", "arduino_driver", "sil_node", "hil_node")


def one_middleware(nodes, jtc_publish_rate_hz):
    """This process's middleware's figures for `nodes` (MoveIt's with stm32_driver), as JSON
    lines, each as it is measured (a benchmark that fails keeps those before)."""
    bench = Bench()
    moveit = moveit_figures(bench) if "stm32_driver" in nodes else []
    for row in itertools.chain(moveit, serial_figures(bench, nodes), arm_figures(bench, nodes, jtc_publish_rate_hz)):
        print(json.dumps({"middleware": os.environ.get("RMW_IMPLEMENTATION", ""), **row}), flush=True)
    print(f"logs of the started processes: {LOGS}", file=sys.stderr)
    bench.node.destroy_node()
    rclpy.shutdown()


MIDDLEWARES = {"rmw_cyclonedds_cpp": "Cyclone DDS", "rmw_fastrtps_cpp": "Fast DDS"}


def table(rows, middlewares):
    """The figures as Markdown: a row per node and path, columns per middleware."""
    def cell(row):
        if row is None:
            return "not run |  |  |  "
        def timed(figure):
            median, largest, count = figure
            return f"{median:.1f} / {largest:.1f} ms" + ("" if count == row["goals"] else f" ({count} goals)")
        first = timed(row["first_ms"]) if row["first_ms"] else "none seen"
        accepted = row.get("first_from_acceptance_ms")
        first += f"; {timed(accepted)}" if accepted else "; no acceptance seen"
        arm = (f"{row['arm_rms_mrad']:.1f} / {row['arm_max_mrad']:.1f} mrad" if "arm_rms_mrad" in row
               else "not measured")
        return (f"{row['succeeded']} of {row['goals']} | {row['rms_mrad']:.1f} / {row['max_mrad']:.1f} mrad | "
                f"{arm} | {first}")
    names = [MIDDLEWARES[m] for m in middlewares]
    head = " | ".join(f"{n}: succeeded | {n}: joint error RMS / max (feedback) | {n}: the arm's error RMS / max | "
                      f"{n}: first setpoint median / max, from sending; from acceptance" for n in names)
    lines = [f"| node | {head} |", "|---|" + "---|" * (4 * len(names))]
    keys = list(dict.fromkeys((r["node"], r["control"]) for r in rows if "node" in r))
    for node, control in keys:
        by = {r["middleware"]: r for r in rows if r.get("node") == node and r["control"] == control}
        path = "native" if control == "native" else "via joint_trajectory_controller"
        lines.append(f"| {node}, {path} | " + " | ".join(cell(by.get(m)) for m in middlewares) + " |")
    lines += ["", "| each error over, samples: feedback / the arm's | " + " | ".join(names) + " |",
              "|---|" + "---|" * len(names)]
    for node, control in keys:
        by = {r["middleware"]: r for r in rows if r.get("node") == node and r["control"] == control}
        counts = [f"{by[m]['samples']} / {by[m].get('arm_samples', '-')}" if m in by else "not run"
                  for m in middlewares]
        lines.append(f"| {label(node, control)} | " + " | ".join(counts) + " |")
    rates = [r for r in rows if r.get("rate")]
    if rates:
        lines += ["", "| /joint_states as a subscriber gets them | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for node in dict.fromkeys(r["node"] for r in rates):
            by = {r["middleware"]: r["rate"] for r in rates if r["node"] == node}
            lines.append(f"| {node} | " + " | ".join(by.get(m, "not run") for m in middlewares) + " |")
    cpu = [r for r in rows if r.get("cpu_percent") is not None]
    if cpu:
        lines += ["", "| the bringup's CPU while the goals ran, % of a core | " + " | ".join(names) + " |",
                  "|---|" + "---|" * len(names)]
        for node, control in dict.fromkeys((r["node"], r["control"]) for r in cpu):
            by = {r["middleware"]: r["cpu_percent"] for r in cpu if r["node"] == node and r["control"] == control}
            path = "native" if control == "native" else "via joint_trajectory_controller"
            lines.append(f"| {node}, {path} | " + " | ".join(f"{by[m]:.0f} %" if m in by else "not run"
                                                             for m in middlewares) + " |")
    moveit = [r for r in rows if "moveit" in r]
    if moveit:
        lines += ["", "| MoveIt on the STM32 arm | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for control in dict.fromkeys(r["moveit"] for r in moveit):
            by = {r["middleware"]: r for r in moveit if r["moveit"] == control}
            figure = lambda r: (f"{r['succeeded']} of {r['goals']}, planning {r['planning_ms']:.0f} ms, "  # noqa: E731
                                f"request to the arm there {r['arrival_s']:.2f} s" if r and r["arrival_s"] else "none")
            lines.append(f"| {label('stm32_driver', control)} | " + " | ".join(figure(by.get(m)) for m in middlewares)
                         + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description="FollowJointTrajectory figures (docs/performance.md)")
    parser.add_argument("nodes", nargs="*", choices=[[], *NODES], default=[], metavar="NODE",
                        help=f"of {', '.join(NODES)}; every one if none is named")
    parser.add_argument("--jtc-publish-rate-hz", type=float, metavar="HZ",
                        help="the parallel arm's ros2_control bringups at this publish rate")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one middleware's run
    args = parser.parse_args()
    nodes, rate_hz = args.nodes or list(NODES), args.jtc_publish_rate_hz
    if rate_hz is not None and not 0.0 < rate_hz <= 10000.0:  # what sil_node takes
        parser.error(f"--jtc-publish-rate-hz={rate_hz:g}: a rate in Hz, above 0 and at most 10000")
    if args.one:
        return one_middleware(nodes, rate_hz)
    options = [] if rate_hz is None else [f"--jtc-publish-rate-hz={rate_hz}"]
    middlewares = [m for m in MIDDLEWARES if installed(m)]
    rows, failed = [], []
    for middleware in middlewares:
        print(f"=== {MIDDLEWARES[middleware]}", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, __file__, "--one", *options, *nodes],
                              env={**os.environ, "RMW_IMPLEMENTATION": middleware}, stdout=subprocess.PIPE, text=True)
        rows += [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0:
            failed.append(f"the {MIDDLEWARES[middleware]} run failed ({done.returncode}): its output above")
    print(f"FollowJointTrajectory on {os.environ.get('ROS_DISTRO', 'ROS 2')}, {GOALS} goals of 1 s each between "
          f"two poses{f', the parallel arm publishing at {rate_hz:g} Hz under JTC' if rate_hz else ''}:\n")
    print(table(rows, middlewares))
    if failed:
        sys.exit("; ".join(failed) + " (the table holds what was measured before)")


if __name__ == "__main__":
    sys.exit(main())

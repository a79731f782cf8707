#!/usr/bin/env python3
"""FollowJointTrajectory figures (docs/performance.md): per node, how long from a goal's
acceptance to the first command at the device, and the RMS and largest joint error along a goal
(the feedback's `error`), through the node's own `~/follow_joint_trajectory` and through
joint_trajectory_controller (`control:=ros2_control`, where ros2_control is installed); and the
rate of the parallel arm's /joint_states as a subscriber gets them. A benchmark, not a test: it
prints figures and asserts nothing. `ARM_HIL_RMW` picks the middleware, as for the suite.

    tests/ros/run.sh --benchmark

The latency is measured on the wall clock at both ends: the acceptance where the action server
logs it, the command where `arm_hil emulate stm32 --print-targets` sees the target change
(looking every millisecond). Only the STM32's emulator reports its targets, so the other nodes
have the error figures alone.
"""

import json
import math
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
from rclpy.action import ActionClient
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from test_follow_joint_trajectory import installed
from test_moveit import MOVEIT, joint_goal, move
from test_nodes import EXECUTABLES, LOGS, RUNNING, launch, start_emulator, stop_all

GOALS = 10
STM32 = ("stm32_shoulder", "stm32_elbow")
STM32_POSES = ([0.5, -0.3], [-0.3, 0.4])
LOGGED = re.compile(r"\[INFO\] \[(\d+)\.(\d+)\] \[[^\]]*\]: (.*)")


def stm32_emulator():
    """The STM32 emulator printing its targets; its device path and the list its targets go to."""
    process = subprocess.Popen([str(EXECUTABLES / "arm_hil"), "emulate", "stm32", "--print-targets"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, text=True)
    RUNNING.append(process)
    path = process.stdout.readline().strip()
    targets = []
    threading.Thread(target=lambda: targets.extend(json.loads(line) for line in process.stdout), daemon=True).start()
    return path, targets


def accepted_at(log_path, *texts):
    """Wall-clock times [ns] of the log lines holding every one of `texts`."""
    times = []
    for line in log_path.read_text().splitlines():
        found = LOGGED.search(line)
        if found and all(text in found.group(3) for text in texts):
            times.append(int(found.group(1)) * 1_000_000_000 + int(found.group(2).ljust(9, "0")[:9]))
    return times


class Bench:
    def __init__(self):
        rclpy.init()
        self.node = rclpy.create_node("arm_hil_follow_benchmark")

    def goals(self, action, joints, poses, seconds=1.0):
        """GOALS goals of `seconds` each, alternating between `poses`: each goal's id, its
        feedback errors [rad] and whether it succeeded."""
        client = ActionClient(self.node, FollowJointTrajectory, action)
        if not client.wait_for_server(timeout_sec=30.0):
            raise RuntimeError(f"{action} is not served")
        runs = []
        for index in range(GOALS):
            point = JointTrajectoryPoint(positions=list(poses[index % 2]), time_from_start=Duration(sec=int(seconds)))
            goal = FollowJointTrajectory.Goal(trajectory=JointTrajectory(joint_names=list(joints), points=[point]))
            errors = []
            sent = client.send_goal_async(goal, feedback_callback=lambda m: errors.extend(m.feedback.error.positions))
            rclpy.spin_until_future_complete(self.node, sent, timeout_sec=10.0)
            handle = sent.result()
            done = handle.get_result_async()
            rclpy.spin_until_future_complete(self.node, done, timeout_sec=seconds + 10.0)
            runs.append((str(uuid.UUID(bytes=bytes(handle.goal_id.uuid))), errors,
                         done.result().status == GoalStatus.STATUS_SUCCEEDED))
            time.sleep(0.3)
        client.destroy()
        return runs

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

    def poses_of(self, joints, seconds=3.0):
        """Two poses the arm takes on its own trajectory, as far apart as it goes in `seconds`."""
        poses = []
        subscription = self.node.create_subscription(
            JointState, "/joint_states",
            lambda m: poses.append([m.position[m.name.index(j)] for j in joints]) if set(joints) <= set(m.name) else None,
            50)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            rclpy.spin_once(self.node, timeout_sec=0.05)
        self.node.destroy_subscription(subscription)
        distance = [max(abs(a - b) for a, b in zip(pose, poses[0])) for pose in poses]
        return poses[0], poses[distance.index(max(distance))]


def errors_line(runs):
    errors = [e for _, run_errors, _ in runs for e in run_errors]
    succeeded = sum(ok for _, _, ok in runs)
    rms = math.sqrt(sum(e * e for e in errors) / len(errors)) if errors else float("nan")
    largest = max((abs(e) for e in errors), default=float("nan"))
    return f"{succeeded}/{len(runs)} succeeded, joint error RMS {rms * 1e3:.2f} mrad, max {largest * 1e3:.2f} mrad"


def latency_line(accepted, targets):
    """From each goal's acceptance to the first target at the device after it [ms]."""
    delays = []
    for when in accepted:
        after = [target["unix_ns"] for target in targets if target["unix_ns"] >= when]
        if after:
            delays.append((after[0] - when) * 1e-6)
    if not delays:
        return "no target seen after an acceptance"
    delays.sort()
    return f"accepted -> first command at the device: median {delays[len(delays) // 2]:.1f} ms, max {delays[-1]:.1f} ms"


JTC_ACTION = "/joint_trajectory_controller/follow_joint_trajectory"


def controls():
    """The paths to measure: the node's own action, and JTC's where ros2_control is installed."""
    with_jtc = all(installed(package) for package in ("controller_manager", "topic_based_ros2_control"))
    return ["native", "ros2_control"] if with_jtc else ["native"]


def label(node, control):
    return f"{node}, native" if control == "native" else f"{node} via joint_trajectory_controller"


def launched(file, control, *arguments):
    """`file` launched with `control:=`; the controllers are active some seconds after the start
    (the controller manager reads the URDF from robot_state_publisher on Jazzy)."""
    native = control == "native"
    node = launch(file, f"control:={control}", "rsp:=false" if native else "rsp:=true", *arguments)
    time.sleep(3.0 if native else 8.0)
    return node


def moveit_figures(bench):
    """MoveIt on the STM32 arm (launch/moveit.launch.py), where it is installed: GOALS joint
    goals between the two poses, planned and executed; the planning time move_group reports,
    and the time from the request to its result (the arm there)."""
    figures = []
    for control in controls() if MOVEIT else []:
        path, _ = stm32_emulator()
        launched("moveit.launch.py", control, "device:=stm32", f"port:={path}")
        planning, arrival = [], []
        for index in range(GOALS):
            result, took = move(bench.node, joint_goal("arm", dict(zip(STM32, STM32_POSES[index % 2]))))
            if result is not None and result.error_code.val == 1:  # MoveItErrorCodes.SUCCESS
                planning.append(result.planning_time)
                arrival.append(took)
        planning.sort()
        arrival.sort()
        timing = (f"planning median {planning[len(planning) // 2] * 1e3:.0f} ms, request to the arm there median "
                  f"{arrival[len(arrival) // 2]:.2f} s" if planning else "no plan succeeded")
        figures.append((f"MoveIt, {label('stm32_driver', control)}", timing, f"{len(planning)}/{GOALS} succeeded"))
        stop_all()
    return figures


def main():
    bench = Bench()
    figures = moveit_figures(bench)

    for control in controls():
        path, targets = stm32_emulator()
        node = launched("stm32.launch.py", control, f"port:={path}")
        native = control == "native"
        runs = bench.goals("/stm32_driver/follow_joint_trajectory" if native else JTC_ACTION, STM32, STM32_POSES)
        # stm32_driver logs "~/follow_joint_trajectory: goal ID of N points" once it has taken a goal.
        logged = ("follow_joint_trajectory: goal", " points") if native else ("Accepted new action goal",)
        accepted = accepted_at(node.log_path, *logged)
        figures.append((label("stm32_driver", control), latency_line(accepted, targets), errors_line(runs)))
        stop_all()

    fingers = ("finger_joint0", "finger_joint1", "finger_joint2", "finger_joint3")
    for control in controls():
        _, path = start_emulator("rdscom")
        launched("arduino.launch.py", control, f"port:={path}")
        action = "/arduino_driver/follow_joint_trajectory" if control == "native" else JTC_ACTION
        runs = bench.goals(action, fingers, ([0.1, 0.5, 0.6, 0.4], [-0.1, 0.9, 0.3, 0.2]))
        figures.append((label("arduino_driver", control), "", errors_line(runs)))
        stop_all()

    arm = ("joint1", "joint2", "joint3")
    for name, file, arguments in [("sil_node", "sil.launch.py", []), ("hil_node", "hil.launch.py", ["hardware:=sim"])]:
        poses = None
        for control in controls():
            launched(file, control, *arguments)
            # Its /joint_states (250 Hz by default) as a subscriber gets them.
            rate = bench.rate() if control == "native" else ""
            # Two poses of the arm's own trajectory, seen before JTC holds it (the same each start).
            poses = poses or bench.poses_of(arm)
            runs = bench.goals(f"/{name}/follow_joint_trajectory" if control == "native" else JTC_ACTION, arm, poses)
            figures.append((label(name, control), rate, errors_line(runs)))
            stop_all()

    print(f"FollowJointTrajectory, {GOALS} goals of 1 s each between two poses:")
    for name, latency, errors in figures:
        print(f"  {name}: {'; '.join(part for part in (latency, errors) if part)}")
    print(f"logs of the started processes: {LOGS}")
    bench.node.destroy_node()
    rclpy.shutdown()


if __name__ == "__main__":
    sys.exit(main())

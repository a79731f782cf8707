"""One ROS 2 client of the secured suite (test_security.py), in whatever enclave, keystore and
security settings its environment gives: what it could see and do, as one JSON line.

    python3 security_probe.py [--goal | --read-only] [--seconds S] [--first-within F]

It reads /joint_states for S s (3) from the first message, waiting F s (10) for it (the rate it
received, and the publisher's from the stamps), tries to create a ~/joint_command publisher and
a ~/change_state client of hil_node, looks for its FollowJointTrajectory server for 5 s, and
with --goal sends it a goal to a pose the arm took on its own path, 0.05 rad from the last one
seen, then reads where the arm is; with --read-only it only reads, /tf as well (waiting for its
first message too). rcl refusing its participant, a publisher or a request topic is reported,
not raised."""

import json
import statistics
import sys
import time

import rclpy
from control_msgs.action import FollowJointTrajectory
from lifecycle_msgs.srv import ChangeState
from rclpy.action import ActionClient
from rclpy.duration import Duration
from sensor_msgs.msg import JointState
from tf2_msgs.msg import TFMessage
from trajectory_msgs.msg import JointTrajectoryPoint

JOINTS = ("joint1", "joint2", "joint3")


def probe(send_goal, seconds, first_within, read_only=False):
    seen = {"joint_states_hz": 0.0, "joint_states_period_hz": 0.0, "server": False, "goal": None, "refused": None}
    try:
        rclpy.init()
        node = rclpy.create_node("security_probe")
    except Exception as error:  # rcl's refusal of the participant, as it says it
        seen["refused"] = f"participant: {error}"
        return seen
    poses, arrivals, stamps = [], [], []

    def joint_states(message):
        arrivals.append(time.monotonic())
        stamps.append(message.header.stamp.sec + message.header.stamp.nanosec * 1e-9)
        poses.append([message.position[message.name.index(j)] for j in JOINTS] if set(JOINTS) <= set(message.name)
                     else None)

    node.create_subscription(JointState, "/joint_states", joint_states, 100)
    transforms = []
    if read_only:
        node.create_subscription(TFMessage, "/tf", transforms.append, 100)
    start = time.monotonic()  # the first message within F s (a secured handshake takes its time), then S s
    while time.monotonic() - start < first_within and not (arrivals and (transforms or not read_only)):
        rclpy.spin_once(node, timeout_sec=0.05)
    start = time.monotonic()
    while arrivals and time.monotonic() - start < seconds:
        rclpy.spin_once(node, timeout_sec=0.05)
    if len(arrivals) > 1:  # from the first message on: discovery takes its time
        seen["joint_states_hz"] = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    gaps = [b - a for a, b in zip(stamps, stamps[1:]) if b > a]
    if gaps:  # the publisher's rate, from the stamps: what a loaded machine's delivery does not change
        seen["joint_states_period_hz"] = 1.0 / statistics.median_high(gaps)
    if read_only:
        seen["tf_messages"] = len(transforms)
        return seen
    # The other ways to move the arm: a joint command and a lifecycle transition; the
    # middleware refuses to create what the enclave's permissions do not allow.
    seen["created"] = []
    for what, create in [("~/joint_command", lambda: node.create_publisher(JointState, "/hil_node/joint_command", 10)),
                         ("~/change_state", lambda: node.create_client(ChangeState, "/hil_node/change_state"))]:
        try:
            create()
            seen["created"].append(what)
        except Exception:  # rcl's refusal
            pass
    try:
        client = ActionClient(node, FollowJointTrajectory, "/hil_node/follow_joint_trajectory")
    except Exception as error:
        seen["refused"] = f"action client: {error}"
        return seen
    seen["server"] = client.wait_for_server(timeout_sec=5.0)
    path = [p for p in poses if p]
    if send_goal and seen["server"] and path:
        last = path[-1]
        target = min(path, key=lambda p: abs(max(abs(a - b) for a, b in zip(p, last)) - 0.05))
        goal = FollowJointTrajectory.Goal()
        goal.trajectory.joint_names = list(JOINTS)
        goal.trajectory.points = [JointTrajectoryPoint(positions=target,
                                                       time_from_start=Duration(seconds=1.5).to_msg())]
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(node, sent, timeout_sec=10.0)
        handle = sent.result()
        if handle is not None and handle.accepted:
            done = handle.get_result_async()
            rclpy.spin_until_future_complete(node, done, timeout_sec=15.0)
            result = done.result()
            poses.clear()
            start = time.monotonic()
            while time.monotonic() - start < 1.0:
                rclpy.spin_once(node, timeout_sec=0.05)
            now = [p for p in poses if p]
            seen["goal"] = {"status": result.status, "error_code": result.result.error_code,
                            "moved": max(abs(a - b) for a, b in zip(now[-1], last)) if now else None,
                            "off_target": max(abs(a - b) for a, b in zip(now[-1], target)) if now else None,
                            } if result else "no result"
        else:
            seen["goal"] = "not accepted" if handle is not None else "no answer"
    return seen


if __name__ == "__main__":
    arguments = sys.argv[1:]
    def option(name, default):
        return float(arguments[arguments.index(name) + 1]) if name in arguments else default

    print(json.dumps(probe("--goal" in arguments, option("--seconds", 3.0), option("--first-within", 10.0),
                           "--read-only" in arguments)), flush=True)

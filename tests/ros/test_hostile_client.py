"""A hostile or careless client against every motion node (docs/safety.md): the far goal, a
deactivate and a protective stop in the middle of a goal, re-activation under a command stream
that goes on, and a flood of goals and commands on the emulated rig. Each node stays up, every
goal ends, and nothing moves that was not commanded anew.

Part of the suite that tests/ros/test_nodes.py runs (its helpers and process handling)."""

import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import rclpy
import yaml
from action_msgs.msg import GoalStatus
from arm_hil.msg import ArmState
from control_msgs.action import FollowJointTrajectory
from lifecycle_msgs.msg import TransitionEvent
from lifecycle_msgs.srv import GetState
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from test_follow_joint_trajectory import (ArduinoFollowJointTrajectory, FollowJointTrajectoryTest, installed, joint_distance,
                                         trajectory)
from test_nodes import (ERROR, OK, SHARE, arc_rows, emulator, launch, multi_dof_trajectory, on_the_emulated_rig,
                        stamp_s, stop)

Result = FollowJointTrajectory.Result
TERMINAL = (GoalStatus.STATUS_SUCCEEDED, GoalStatus.STATUS_ABORTED, GoalStatus.STATUS_CANCELED)
MOTORS = ("joint1", "joint2", "joint3")


class HostileClient(FollowJointTrajectoryTest):
    """What a hostile client sends, and what the nodes make of it."""

    node_name, joints = "sil_node", MOTORS

    def far_goal(self, node):
        """The goal that used to abort the node: one point at the arm's own position, two billion
        seconds away, sent with `ros2 action send_goal` as written. It is refused, and the node goes
        on publishing."""
        self.node_name = node
        here = self.positions()
        goal = (f"{{trajectory: {{joint_names: [{', '.join(MOTORS)}], points: [{{positions: "
                f"[{', '.join(str(p) for p in here)}], time_from_start: {{sec: 2000000000}}}}]}}}}")
        # Answered within the command line's 60 s (its own start and discovery included): that a
        # goal's cost is bounded before anything is allocated is tests/follower.rs's to show, not
        # a wall-clock time here.
        said = subprocess.run(["ros2", "action", "send_goal", f"/{node}/follow_joint_trajectory",
                               "control_msgs/action/FollowJointTrajectory", goal],
                              capture_output=True, text=True, timeout=60)
        self.assertIn("ABORTED", said.stdout, said.stdout + said.stderr)
        self.assertIn("max_duration_s", said.stdout)
        self.assertIsNone(self.launched.poll(), "the node ended")
        self.first(f"/{node}/state", ArmState, timeout=10.0)  # it still publishes

    def test_the_far_goal_is_refused_and_sil_node_stays_up(self):
        self.launched = launch("sil.launch.py", "rsp:=false")
        self.far_goal("sil_node")

    def test_the_far_goal_is_refused_and_hil_node_stays_up(self):
        self.launched = launch("hil.launch.py", "hardware:=sim", "rsp:=false")
        self.far_goal("hil_node")

    def goal_ends_with_the_transition(self, node, joints, target, transition, seconds=6.0, after=2.5, holds=True):
        """A `seconds` goal to `target`; the lifecycle `transition` (its label, sent as `ros2
        lifecycle set` sends it) once its feedback has run `after` s: the goal ends (aborted, saying why), its last feedback
        stamped within 0.1 s of the node's stamp of its inactive state, and the joints hold (as
        /joint_states show them: `holds`, where the node publishes them while inactive)."""
        self.node_name, self.joints = node, joints
        events, fed = [], []
        self.subscribe_matched(TransitionEvent, f"/{node}/transition_event", events.append)
        client = self.client()
        handle = self.send(client, [(seconds, target)], feedback=lambda m: fed.append(stamp_s(m.feedback.header.stamp)))
        self.assertTrue(handle.accepted)
        # `after` s of the goal running, by its feedback's stamps
        self.spin_until(lambda: fed and fed[-1] - fed[0] >= after, after + 10.0)
        if not (fed and fed[-1] - fed[0] >= after):
            ended = handle.get_result_async()
            rclpy.spin_until_future_complete(self.node, ended, timeout_sec=1.0)
            why = f"; it ended: {ended.result().status} {ended.result().result.error_string!r}" if ended.done() else ""
            self.fail(f"the goal's feedback did not run {after} s within {after + 10} s{why}")
        self.transition(node, transition)
        done = self.result_of(handle, timeout=5.0)
        self.assertEqual(done.status, GoalStatus.STATUS_ABORTED, done.result.error_string)
        self.assertIn("deactivated", done.result.error_string)
        def went_inactive():
            return [m.timestamp * 1e-9 for m in events if m.goal_state.label == "inactive"]

        self.spin_until(went_inactive, 5.0)
        self.assertTrue(went_inactive(), f"no transition to inactive among {len(events)} events")
        self.assertTrue(fed, "no feedback while the goal ran")
        # Both stamps are the node's ROS clock; the goal ran up to the transition, and not on.
        ran_on_s = max(fed) - went_inactive()[0]
        self.assertLess(ran_on_s, 0.1, "the goal outlived the transition: feedback stamped after it")
        self.assertGreater(ran_on_s, -0.5, "the goal's feedback stopped long before the transition")
        if holds:
            self.assert_still(1.0, tolerance=0.02)
        client.destroy()

    def test_a_deactivate_ends_hil_nodes_running_goal_at_once(self):
        self.launched = launch("hil.launch.py", "hardware:=sim", "rsp:=false")
        start, apart = self.poses_where_its_own_trajectory_ends()
        # An inactive hil_node runs no loop and publishes no joint states: the arm is looked at
        # once active again, where it holds where it stopped (the goal does not carry on).
        self.goal_ends_with_the_transition("hil_node", MOTORS, apart, "deactivate", holds=False)
        self.transition("hil_node", "activate")
        self.assert_still(1.5, tolerance=0.02)

    def test_a_deactivate_ends_the_stm32_drivers_running_goal_at_once(self):
        self.start_driver("stm32", "stm32.launch.py", "stm32_driver: link", "rsp:=false")
        self.goal_ends_with_the_transition("stm32_driver", ("stm32_shoulder", "stm32_elbow"), [1.2, -1.0],
                                           "deactivate", seconds=8.0, after=1.0)

    def test_a_deactivate_ends_the_arduino_drivers_running_goal_at_once(self):
        self.start_driver("rdscom", "arduino.launch.py", "arduino_driver: link", "rsp:=false")
        self.goal_ends_with_the_transition("arduino_driver", ArduinoFollowJointTrajectory.joints, [0.3, 1.4, 1.4, 1.4],
                                           "deactivate", seconds=8.0, after=1.0)

    def hil_node_on_the_emulated_rig(self, *faults, sensor_timeout_s=None):
        """hil_node's bringup on the emulated rig with `faults` (emulate sensor's flags), its loop
        running (its status says so), its sensor timeout `sensor_timeout_s` where given (else the
        package's): the rig, where the arm holds at the end of its start-up arc, and where it was
        1 s before (0.17 rad apart; a joint-space goal between them keeps within 0.1 mm of the
        forearm's sphere, docs/hil.md)."""
        params = []
        if sensor_timeout_s is not None:
            config = yaml.safe_load((SHARE / "config" / "hil_node.yaml").read_text())
            config["/**"]["ros__parameters"]["hil"]["sensor_timeout_s"] = sensor_timeout_s
            path = pathlib.Path(tempfile.mkdtemp()) / "hil_node.yaml"
            path.write_text(yaml.safe_dump(config))
            params = [f"params_file:={path}"]
        for attempt in (1, 2):
            self.take_the_emulated_rig()
            rig, (sensor, stepper) = emulator("sensor", *faults)
            self.launched = launch("hil.launch.py", "hardware:=robotscara", f"sensor_device:={sensor}",
                                   f"arduino_device:={stepper}", "rsp:=false", *params)
            self.node_name, self.joints = "hil_node", MOTORS
            # The arm runs its start-up arc (9.9 s) once, then holds: where, and where it was 1 s
            # before, are the poses.
            try:
                start, apart = self.poses_where_its_own_trajectory_ends()
                unseen = None
            except AssertionError as error:
                unseen = error
            loop = self.wait_status_where(
                "hil_node: loop", lambda s: s.message.startswith("running") or "protective stop" in s.message,
                "neither running nor in a protective stop", 20.0)
            if "protective stop" not in loop.message or attempt == 2:
                break
            # A loaded pass once saw the start-up arc itself trip the 1 cm tracking bound (10.2 mm
            # at 1.9 s; `arm_hil hil` on the emulated rig stays within 2 mm, loaded or not: an open
            # finding, docs/testing.md). The stop is the node's to make, and not these tests'
            # subject; they need the arc, so the rig and the node start once more, the first
            # attempt's logs kept beside the second's.
            print(f"\n  note: the start-up arc ended in {loop.message!r}; the rig and hil_node start again",
                  file=sys.stderr)
            for process in (self.launched, rig):
                stop(process)
                process.log_path.rename(process.log_path.with_name(f"{process.log_path.stem}_first_attempt.log"))
        self.assertNotIn("protective stop", loop.message, "the start-up arc tripped a protective stop twice")
        if unseen:
            raise unseen
        self.assertGreater(joint_distance(start, apart), 0.1,
                           f"the start-up arc was over before it was seen: {start}, {apart}")
        return rig, start, apart

    def rig_said(self, rig):
        """What the rig emulator printed (its log, kept with a failed test's), once interrupted: no
        hard stop was reached."""
        stop(rig)
        said = rig.log_path.read_text()
        self.assertNotIn("hard stop", said, "the arm reached a hard stop")
        return said

    @on_the_emulated_rig
    def test_a_rig_that_stops_mid_goal_ends_hil_nodes_running_goal_with_its_reason(self):
        """A frozen sensor under a moving goal: the loop ends in a protective stop (the tracking
        error) or a fault (a run of readings the rig cannot produce), whichever comes first; the
        goal ends with it, aborted with the stop's reason and code."""
        # The sensor freezes when the test says (SIGHUP), once the goal has the arm moving: a
        # freeze at a fixed time after the emulator starts left the arm tracking for 10-20 s
        # before it, long enough, on a loaded machine, for the tracking bound to trip first.
        # The frozen sensor keeps sending (the same reading): the sensor's timeout is not this
        # test's subject, and at the package's 0.1 s a loaded host's stall once ended the
        # start-up arc in "sensor lost" (docs/testing.md).
        rig, start, apart = self.hil_node_on_the_emulated_rig("--freeze-sensor", "--faults-after", "3600",
                                                              sensor_timeout_s=0.5)
        client = self.client()
        # Back and forth between two poses of its own trajectory for 60 s, 4 s a way: the arm
        # moves all the while, so a frozen estimate is soon off its reference. Stopping at each
        # pose (velocities 0, as a planner's trajectory gives them): straight lines would turn at
        # full speed there, which slips a stepper by itself.
        goal = FollowJointTrajectory.Goal(
            trajectory=trajectory(MOTORS, [(4.0 * k, apart if k % 2 else start) for k in range(1, 16)]))
        for point in goal.trajectory.points:
            point.velocities = [0.0] * len(MOTORS)
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(self.node, sent, timeout_sec=10.0)
        handle = sent.result()
        self.assertTrue(handle.accepted)

        def moved(messages):
            poses = [[m.position[m.name.index(joint)] for joint in MOTORS] for _, m in messages
                     if set(MOTORS) <= set(m.name)]
            return poses and joint_distance(poses[-1], poses[0]) > 0.02

        ending = handle.get_result_async()
        self.assertTrue(moved(self.collect("/joint_states", JointState, 5.0, until=moved)),
                        "the arm did not move under the goal within 5 s")
        self.assertFalse(ending.done(), f"the goal ended before the sensor froze: {ending.result()}")
        os.killpg(rig.pid, signal.SIGHUP)
        rclpy.spin_until_future_complete(self.node, ending, timeout_sec=70.0)
        self.assertTrue(ending.done(), "no result within 70 s of the sensor's freeze")
        done = ending.result()
        self.assertEqual(done.status, GoalStatus.STATUS_ABORTED, done.result.error_string)
        self.assertIn("the arm stopped, holding", done.result.error_string)
        code = Result.PATH_TOLERANCE_VIOLATED if "protective stop" in done.result.error_string else Result.INVALID_GOAL
        self.assertEqual(done.result.error_code, code, done.result.error_string)
        self.wait_status("hil_node: loop", ERROR)
        self.assertIsNone(self.launched.poll(), "the node ended")
        client.destroy()
        self.assertIn("faults injected", self.rig_said(rig),
                      "the emulator did not freeze the sensor")

    @unittest.skipUnless(installed("controller_manager") and installed("topic_based_ros2_control"),
                         "ros2_control is not built here (tools/ros_underlay.sh with ROS2_CONTROL=1)")
    def test_reactivation_under_a_streaming_forward_position_controller_holds_the_arm_until_a_new_command(self):
        params = pathlib.Path(tempfile.mkdtemp()) / "slow_commands.yaml"
        # Commands ramp at 1.5 mm/s: the step below takes about 4 s, long enough to be stopped on
        # the way (the deactivate has about 1.2 s between the step's first 5 mrad and its 20th).
        params.write_text("/**:\n  ros__parameters:\n    autostart: true\n    joint_command_speed_m_s: 0.0015\n")
        self.launched = launch("hil.launch.py", "hardware:=sim", "control:=ros2_control", f"params_file:={params}")
        self.wait_controllers({"joint_trajectory_controller": "active", "forward_position_controller": "inactive"})
        self.switch_controllers("joint_trajectory_controller", "forward_position_controller")
        self.node_name, self.joints = "hil_node", MOTORS
        here = self.positions()
        # A step hil_node ramps to, streamed at 50 Hz: small, for the path to it to keep within
        # the protective stop's bounds wherever the arm is, and within 1 cm of the forearm's
        # sphere (joint1 alone 0.03 rad on: 4-6 mm off it; 0.06 rad was 8-12 mm).
        target = [here[0] + 0.03, here[1], here[2]]
        publisher = self.node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
        streaming = threading.Event()
        streaming.set()
        command = {"data": target}

        def stream():
            while streaming.is_set():
                publisher.publish(Float64MultiArray(data=command["data"]))
                time.sleep(0.02)

        streamer = threading.Thread(target=stream, daemon=True)
        streamer.start()
        try:
            # Stopped on the way: once the arm has begun the step (the stream's first commands
            # wait for discovery), long before it ends.
            self.wait_joint_states(lambda m: set(MOTORS) <= set(m.name) and abs(
                m.position[m.name.index("joint1")] - here[0]) > 0.005, "the step did not begin")
            self.transition("hil_node", "deactivate")
            # The broadcaster's /joint_states keep the last state the node sent.
            stopped = self.positions(0.2)
            self.assertTrue(abs(stopped[0] - target[0]) > 0.01, f"the step was over before the stop: {stopped}")
            time.sleep(1.0)
            self.transition("hil_node", "activate")
            # The stream still says the old target: the arm holds where it stopped. The hold
            # starts from a fresh estimate and settles within 0.5 s, by up to 24 mrad either way
            # (seen on both distros), then stays within 2 mrad, where following the stream would
            # move it on at its 1.5 mm/s. (A loaded CI run saw 0.19 rad: the simulated arm had kept
            # its velocity through the stop, and set off with it through a stall of the resumed
            # loop; docs/decisions.md, the simulated rig's stop.)
            time.sleep(0.5)
            held = self.assert_still(2.0, tolerance=0.005)
            self.assertTrue(all(abs(h - s) < 0.04 for h, s in zip(held, stopped)),
                            f"the arm did not hold where it stopped: {stopped} -> {held}")
            # A new command moves it: back toward where it started, keeping near the sphere.
            command["data"] = [held[0] - 0.02, held[1], held[2]]
            self.wait_joint_states(lambda m: set(MOTORS) <= set(m.name) and abs(
                m.position[m.name.index("joint1")] - command["data"][0]) < 0.01, "a new command did not move it")
        finally:
            streaming.clear()
            streamer.join()

    @on_the_emulated_rig
    def test_a_flood_of_goals_and_commands_for_10_s_on_the_emulated_rig(self):
        # The flood is not about the sensor's timeout: the rig's 0.1 s is missed when the host
        # stalls a loaded machine for as long (docs/testing.md), a device fault beside the point.
        rig, start, apart = self.hil_node_on_the_emulated_rig(sensor_timeout_s=0.5)
        client = self.client()
        commands = self.node.create_publisher(JointState, "/hil_node/joint_command", 10)
        segments = self.node.create_publisher(type(multi_dof_trajectory([])), "/hil_node/trajectory", 10)
        chance = random.Random(44)
        # One goal sure to be accepted first, to where the arm is, in 2 s: the flood soon trips a
        # protective stop, after which the node rejects every command, goals too.
        first = self.send(client, [(2.0, self.positions(0.1))])
        self.assertTrue(first.accepted, "a goal to where the arm is was not accepted")
        handles = [first]
        # 10 s: the protective stop comes within a few seconds of flooding; what follows it is
        # the same refusal again and again.
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            kind = chance.randrange(6)
            if kind == 0:
                pose = [p + chance.uniform(-0.05, 0.05) for p in (start if chance.random() < 0.5 else apart)]
                seconds = chance.choice([1e-6, 0.5, 2.0, 1e9])
                goal = FollowJointTrajectory.Goal(trajectory=trajectory(MOTORS, [(seconds, pose)]))
                sent = client.send_goal_async(goal)
                rclpy.spin_until_future_complete(self.node, sent, timeout_sec=5.0)
                if sent.done() and sent.result().accepted:
                    handles.append(sent.result())
            elif kind == 1 and handles:
                handles[-1].cancel_goal_async()
            elif kind == 2:
                pose = [p + chance.uniform(-0.3, 0.3) for p in start]
                commands.publish(JointState(name=list(MOTORS), position=pose))
            elif kind == 3:
                segments.publish(multi_dof_trajectory([[t * 0.1, *row[1:]] for t, row in
                                                       enumerate(arc_rows(step=200), start=1)]))
            rclpy.spin_once(self.node, timeout_sec=0.01)
        self.assertIsNone(self.launched.poll(), "hil_node ended")
        for handle in handles:
            done = self.result_of(handle, timeout=30.0)
            self.assertIn(done.status, TERMINAL)
        client.destroy()
        state = self.call(GetState, "/hil_node/get_state", GetState.Request()).current_state
        # The log without the flood's own refusals and goals, which would hide why the node is
        # where it is (a loaded pass found it unconfigured with 40 lines of refusals to show), but
        # with every transition (": now unconfigured", whatever its reason says).
        routine = ("rejected", "refused", "aborted (InvalidGoal)", "of 1 points", "cancelled: ")
        said = [line for line in self.launched.log_path.read_text().splitlines()
                if ": now " in line or not any(word in line for word in routine)]
        # The rig first: an arm at a hard stop says more than the state the node is left in.
        self.rig_said(rig)
        self.assertIn(state.label, ("active", "inactive"), "\n".join(said[-40:]))

"""Whatever stops a node stops its device first (docs/safety.md, "Exit paths"): SIGTERM to
stm32_driver, arduino_driver, hil_node and legacy_bridge in the middle of a motion on the
emulators, and a panic injected in hil_node's loop and publishing threads (ARM_HIL_INJECT_FAULT,
the test-only fault hook). The emulators say when the device was told to stop (their
--print-targets and --print-stops lines, stamped with the wall clock); each node is started
directly, as StartAndStop starts them, so that the signal reaches it.

Part of the suite that tests/ros/test_nodes.py runs (its helpers and process handling)."""

import os
import signal
import sys
import threading
import time

import rclpy
from action_msgs.msg import GoalStatus
from control_msgs.action import FollowJointTrajectory

from test_follow_joint_trajectory import FollowJointTrajectoryTest, trajectory
from test_nodes import EXECUTABLES, LOADED_STM32_SILENCE_S, LOGS, OK, REPO, SHARE, emulator, free_port, on_the_emulated_rig, said, start

__all__ = ["ExitPaths"]

# The device commanded to a stop or hold within this of the signal [s] (and of at most as much
# again of the time the host ran no CPU of the machine); the process gone within EXIT_BOUND_S.
STOP_BOUND_S = 0.1
EXIT_BOUND_S = 1.0
# How long after a signal the host's steal is sampled [s]: past STOP_BOUND_S twice over.
STEAL_SAMPLED_S = 0.5


def stolen_s():
    """Per CPU of this machine, how long its host has run something else in its place [s]
    (/proc/stat's steal column, in clock ticks)."""
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    with open("/proc/stat") as stat:
        rows = [line.split() for line in stat]
    return [int(row[8]) / ticks_per_s for row in rows if row[0].startswith("cpu") and row[0] != "cpu"]


class StealSampler(threading.Thread):
    """The steal column sampled every 5 ms for STEAL_SAMPLED_S from its start, each sample
    stamped [unix ns]: how long the host kept the machine's CPUs over a window of that time."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = [(time.time_ns(), stolen_s())]
        self.start()

    def run(self):
        until = time.monotonic() + STEAL_SAMPLED_S
        while time.monotonic() < until:
            time.sleep(0.005)
            self.samples.append((time.time_ns(), stolen_s()))

    def both_away_s(self, since_ns, until_ns):
        """At most how long the host ran neither CPU between `since_ns` and `until_ns` [unix ns]:
        the lesser CPU's steal from the last sample at or before the one to the first at or after
        the other, less a tick (the counters count whole ticks), capped at STOP_BOUND_S."""
        samples = list(self.samples)
        before = [sample for sample in samples if sample[0] <= since_ns] or samples[:1]
        after = [sample for sample in samples if sample[0] >= until_ns] or samples[-1:]
        (_, then), (_, now) = before[-1], after[0]
        tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        away_s = min(b - a for a, b in zip(then, now)) - tick_s
        return min(max(away_s, 0.0), STOP_BOUND_S)


def wait_for_emulator(seen, timeout=5.0):
    """Until the emulator's log shows what `seen()` looks for (it writes behind the device's own
    time stamps, later under load), then 0.5 s more: what the device got after it is looked at too."""
    deadline = time.monotonic() + timeout
    while not seen() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)


def node(executable, *parameters, env=None):
    """A node started from its shipped parameter file with `parameters` on top."""
    command = [str(EXECUTABLES / executable), "--ros-args", "--params-file", str(SHARE / "config" / f"{executable}.yaml")]
    for parameter in parameters:
        command += ["-p", parameter]
    return start(command, f"{executable}_exit", env)


class ExitPaths(FollowJointTrajectoryTest):
    def goal_on_its_way(self, points, accepted_within=20.0):
        """A goal the node accepts (it may still be activating), its result asked for; then the
        arm is let move for a second."""
        client = self.client()
        goal = FollowJointTrajectory.Goal(trajectory=trajectory(self.joints, points))
        deadline = time.monotonic() + accepted_within
        while True:
            # Sent again when refused, and when unanswered: Fast DDS under load may lose the
            # answer to a request sent as soon as the server is seen (the new goal would only
            # replace one accepted unanswered).
            sent = client.send_goal_async(goal)
            rclpy.spin_until_future_complete(self.node, sent, timeout_sec=5.0)
            handle = sent.result() if sent.done() else None
            if (handle and handle.accepted) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertTrue(handle and handle.accepted, f"the goal was refused or unanswered within {accepted_within} s")
        result = handle.get_result_async()
        self.spin_until(lambda: False, 1.0)
        return result

    def terminate(self, process):
        """SIGTERM to `process`; when it was sent [unix ns]."""
        self.steal = StealSampler()
        sent = time.time_ns()
        os.kill(process.pid, signal.SIGTERM)
        return sent

    def assert_within_stop_bound(self, sent_ns, stopped_ns, lines):
        """The device stopped at `stopped_ns` within STOP_BOUND_S of the signal at `sent_ns` [unix
        ns], plus at most STOP_BOUND_S more of what the host ran neither CPU of the machine in
        between (StealSampler): a silence of the whole machine (one of 109 ms in a loaded pass)
        delays every process alike and is no latency of the node's."""
        host_away_s = self.steal.both_away_s(sent_ns, stopped_ns)
        self.assertLess((stopped_ns - sent_ns) / 1e9, STOP_BOUND_S + host_away_s,
                        f"the host ran neither CPU of the machine for at most {host_away_s:.3f} s of it: {lines}")

    def assert_aborted(self, result, reason):
        rclpy.spin_until_future_complete(self.node, result, timeout_sec=5.0)
        self.assertTrue(result.done(), "the goal got no result")
        self.assertEqual(result.result().status, GoalStatus.STATUS_ABORTED, result.result())
        self.assertIn(reason, result.result().result.error_string)

    def assert_gone(self, process, since_ns, status=0):
        """The process ends within EXIT_BOUND_S of `since_ns` [unix ns], with `status`."""
        left = EXIT_BOUND_S - (time.time_ns() - since_ns) / 1e9
        try:
            exit_status = process.wait(max(left, 0.0) + 0.05)
        except Exception:
            self.fail(f"{process.args[0]} still running {EXIT_BOUND_S} s on: {process.log_path.read_text()[-2000:]}")
        self.assertEqual(exit_status, status, process.log_path.read_text()[-2000:])

    def assert_stopped_after(self, lines, since_ns, stopped):
        """Of the emulator's `lines`, those at or after `since_ns`, the signal: the first that
        `stopped` says is a stop comes within the stop bound, and none after it says otherwise."""
        wait_for_emulator(lambda: any(stopped(line) for line in lines() if line["unix_ns"] >= since_ns))
        after = [line for line in lines() if line["unix_ns"] >= since_ns]
        stops = [i for i, line in enumerate(after) if stopped(line)]
        self.assertTrue(stops, f"no stop after the signal: {after}")
        self.assert_within_stop_bound(since_ns, after[stops[0]]["unix_ns"], after)
        self.assertTrue(all(stopped(line) for line in after[stops[0]:]), f"it moved again: {after}")
        return after[stops[0]]

    def test_sigterm_mid_goal_holds_the_stm32_arm_where_it_is_and_aborts_the_goal(self):
        self.node_name, self.joints = "stm32_driver", ("stm32_shoulder", "stm32_elbow")
        # Servos slow enough (2 s) that the goal's setpoints run well ahead of them.
        firmware, (path,) = emulator("stm32", "--print-targets", "--servo-time-constant", "2")
        driver = node("stm32_driver", f"port:={path}", f"link.disconnected_after_s:={LOADED_STM32_SILENCE_S}")
        result = self.goal_on_its_way([(4.0, [0.8, -0.6])])
        sent = self.terminate(driver)
        self.assert_aborted(result, "shut down")
        self.assert_gone(driver, sent)
        # The last target is a hold where the servos were, within the bound; the goal's last
        # setpoint before it was not there.
        wait_for_emulator(lambda: any(line["unix_ns"] >= sent for line in said(firmware)))
        lines = said(firmware)
        after = [line for line in lines if line["unix_ns"] >= sent]
        self.assertTrue(after, "no hold after the signal")
        hold, setpoint = after[-1], [line for line in lines if line["unix_ns"] < sent][-1]
        self.assert_within_stop_bound(sent, hold["unix_ns"], after)
        off = lambda line: max(abs(t - a) for t, a in zip(line["targets"], hold["angles"]))  # noqa: E731
        self.assertLess(off(hold), 0.05, f"the hold is not where the servos were: {hold}")
        self.assertGreater(off(setpoint), 0.1, f"the goal's setpoint {setpoint} was there already: nothing shown")

    def test_sigterm_mid_goal_stops_the_testbench_and_aborts_the_goal(self):
        self.node_name = "arduino_driver"
        self.joints = ("finger_joint0", "finger_joint1", "finger_joint2", "finger_joint3")
        mcu, (path,) = emulator("rdscom", "--print-stops")
        driver = node("arduino_driver", f"port:={path}", "link.heartbeat_misses:=10")  # as LOADED_MCU_HEARTBEAT
        result = self.goal_on_its_way([(6.0, [0.1, 0.5, 0.6, 0.4])])
        sent = self.terminate(driver)
        self.assert_aborted(result, "shut down")
        self.assert_gone(driver, sent)
        self.assert_stopped_after(lambda: said(mcu), sent, lambda line: line["stops"] >= 1)

    def hil_node_on_the_rig(self, env=None, goal_s=4.0):
        """hil_node on the emulated rig, running its arc; a goal of `goal_s` on its way between two
        poses of the arc; the rig emulator. The protective stop's tracking bound is 5 cm, not
        1 cm, and its slip bound 6 rad of electrical lag, not 2.2 (a loaded Humble pass stopped
        on 2.8 rad 0.17 s after the start): on a loaded machine the emulated rig's
        pseudo-terminals lag, and the stop would rightly end the goal before the exit path these
        tests are about (the stop has tests of its own). A path may leave the forearm's sphere
        by 5 cm, not 1 cm: the goal joins the arc from where the arm is, on it later than the
        poses, and that can sag past 1 cm (docs/hil.md); the emulated rig has no forearm."""
        self.node_name, self.joints = "hil_node", ("joint1", "joint2", "joint3")
        self.take_the_emulated_rig()
        rig, (sensor, stepper) = emulator("sensor", "--print-stops")
        hil = node("hil_node", "hardware:=robotscara", f"sensor_device:={sensor}", f"arduino_device:={stepper}",
                   "hil.protection.max_tracking_error_m:=0.05", "hil.protection.max_lag_rad:=6.0",
                   "hil.protection.max_forearm_offset_m:=0.05", env=env)
        self.wait_loop_running()
        _, apart = self.poses_of_its_own_trajectory(1.0)
        result = self.goal_on_its_way([(goal_s, apart)])
        return rig, hil, result

    @on_the_emulated_rig
    def test_sigterm_mid_goal_stops_hil_nodes_motors_and_aborts_the_goal(self):
        rig, hil, result = self.hil_node_on_the_rig()
        sent = self.terminate(hil)
        self.assert_aborted(result, "shut down")
        self.assert_gone(hil, sent)
        self.assert_stopped_after(lambda: said(rig), sent, lambda line: not line["moving"])

    def panic_mid_goal(self, thread, reason):
        """A panic injected in hil_node's `thread` 6 s after it starts, while its goal runs: the
        motors stop, the goal ends ABORTED with `reason`, the node ends with a panic's status."""
        env = {"ARM_HIL_INJECT_FAULT": f"panic:{thread}:6"}
        rig, hil, result = self.hil_node_on_the_rig(env=env, goal_s=15.0)
        self.assert_aborted(result, reason)
        # The emulator writes its line of the stop after the fact, later under load.
        wait_for_emulator(lambda: (lines := said(rig)) and not lines[-1]["moving"])
        lines = said(rig)
        self.assertTrue(lines and not lines[-1]["moving"], f"the motors were not stopped, or moved again: {lines}")
        self.assert_gone(hil, lines[-1]["unix_ns"], status=101)
        self.assertIn("panicked", hil.log_path.read_text())

    @on_the_emulated_rig
    def test_a_panic_in_hil_nodes_loop_thread_stops_the_motors_ends_the_goal_and_the_node(self):
        self.panic_mid_goal("hil-loop", "a loop thread panicked")

    @on_the_emulated_rig
    def test_a_panic_in_hil_nodes_publishing_thread_stops_the_motors_ends_the_goal_and_the_node(self):
        self.panic_mid_goal("hil-publish", "shut down")

    @on_the_emulated_rig
    def test_sigterm_mid_h_session_stops_legacy_bridges_motors(self):
        self.take_the_emulated_rig()
        rig, (sensor, stepper) = emulator("sensor", "--print-stops")
        port = free_port()
        bridge = node("legacy_bridge", "hil_hardware:=robotscara", f"server.bind:=127.0.0.1:{port}",
                      'server.device_allow_list:=["/dev/pts/*"]')
        self.wait_status("legacy_bridge: server", OK)
        # The arc of 31 s, from where the emulated arm rests.
        arc = LOGS / "arc_slow.csv"
        start([str(EXECUTABLES / "arm_hil"), "trajectory", "arc", "--max-speed", "1.5", "-o", str(arc)],
              "arc_slow").wait(10.0)
        start([sys.executable, str(REPO / "examples" / "legacy_client.py"), f"127.0.0.1:{port}", str(arc),
               "--mode", "H", "--sensor", sensor, "--arduino", stepper], "legacy_client_h")
        deadline = time.monotonic() + 20.0
        while not any(line["moving"] for line in said(rig)) and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertTrue(any(line["moving"] for line in said(rig)), "the session never drove the motors")
        time.sleep(2.0)
        sent = self.terminate(bridge)
        self.assert_gone(bridge, sent)
        self.assert_stopped_after(lambda: said(rig), sent, lambda line: not line["moving"])

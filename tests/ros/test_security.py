"""DDS Security (SROS2), where sros2 is installed: hil.launch.py under `enclave:=/arm_hil` with
ROS_SECURITY_STRATEGY=Enforce, and the lab's clients as security_probe.py, each in its own
process and identity: the operator's goal moves the simulated arm; an unsecured client, one of a
foreign CA and the viewer get nothing through, and hil_node logs no goal from them; the viewer
reads /joint_states at the node's rate. The keystores are made for the run (tools/sros2_keystore.sh)."""

import collections
import fcntl
import fnmatch
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest
import xml.etree.ElementTree as ET

from test_nodes import LOADED_MCU_HEARTBEAT, LOADED_STM32_SILENCE, LOGS, bag_messages, emulator, launch, stop, stop_all, leave_the_machine, take_the_machine, wait_for_line
from test_follow_joint_trajectory import installed

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBE = pathlib.Path(__file__).with_name("security_probe.py")


def keystore(name, *policies):
    """A keystore made for the run with the enclaves of `policies` (every policy of security/)."""
    path = LOGS / name
    subprocess.run(["bash", str(REPO / "tools" / "sros2_keystore.sh"), str(path),
                    *[str(REPO / "security" / p) for p in policies]],
                   check=True, capture_output=True, timeout=600)
    return path


def secured(keystore_path, enclave=None):
    env = {"ROS_SECURITY_ENABLE": "true", "ROS_SECURITY_STRATEGY": "Enforce", "ROS_SECURITY_KEYSTORE": str(keystore_path)}
    if enclave:
        env["ROS_SECURITY_ENCLAVE_OVERRIDE"] = enclave
    return env


@unittest.skipUnless(installed("sros2"), "sros2 is not built here (tools/ros_underlay.sh builds it)")
class SecuredBringup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.keystore = keystore("keystore")
        cls.foreign = keystore("foreign_keystore", "clients.policy.xml")

    def setUp(self):
        take_the_machine(fcntl.LOCK_SH)

    def tearDown(self):
        stop_all()  # what a failed test left
        leave_the_machine()

    def probes(self, **clients):
        """What each client (name=(env, probe arguments)) saw and did (security_probe.py), all
        run at once: most of a refused probe's time is its wait for what it never gets. Each is
        a process and an identity of its own; one still running after 60 s is killed."""
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
        running = {}
        try:
            for name, (env, arguments) in clients.items():
                # Its verdict apart from the middleware's log lines, which Fast DDS writes to the
                # same line as the verdict where both share a file.
                with open(LOGS / f"probe_{name}.json", "w") as verdict, open(LOGS / f"probe_{name}.log", "w") as log:
                    running[name] = subprocess.Popen([sys.executable, str(PROBE), *arguments],
                                                     env={**environment, **env}, stdout=verdict, stderr=log)
            deadline = time.monotonic() + 60.0
            for process in running.values():
                try:
                    process.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for process in running.values():
                if process.poll() is None:
                    process.kill()
                    process.wait()
        seen = {}
        for name, process in running.items():
            said = (LOGS / f"probe_{name}.log").read_text()
            self.assertNotEqual(process.returncode, -signal.SIGKILL, f"{name}: the probe did not end within 60 s")
            lines = [line for line in (LOGS / f"probe_{name}.json").read_text().splitlines() if line.startswith("{")]
            self.assertTrue(lines, f"{name}: the probe said nothing (it ended with {process.returncode}): {said[-2000:]}")
            seen[name] = json.loads(lines[-1])
        return seen

    def goals_logged(self, log):
        """The goals hil_node logged, accepted or refused."""
        return len(set(re.findall(r"~/follow_\w+: goal (\S+)", log.read_text())))

    def test_under_enforce_only_the_operator_commands_and_the_viewer_reads(self):
        hil = launch("hil.launch.py", "hardware:=sim", "enclave:=/arm_hil", env=secured(self.keystore))
        try:
            self.assertTrue(wait_for_line(hil, "now active", timeout=30), hil.log_path.read_text()[-3000:])
            operator = self.probes(operator=(secured(self.keystore, "/arm_hil/operator"), ["--goal"]))["operator"]
            self.assertTrue(operator["server"], operator)
            self.assertIsInstance(operator["goal"], dict, operator)
            self.assertEqual((operator["goal"]["status"], operator["goal"]["error_code"]), (4, 0), operator)
            self.assertGreater(operator["goal"]["moved"], 0.03, f"the goal moved the arm: {operator}")
            self.assertLess(operator["goal"]["off_target"], 0.02, f"to its target: {operator}")
            self.assertEqual(operator["created"], ["~/joint_command", "~/change_state"], operator)
            commanded = self.goals_logged(hil.log_path)
            self.assertEqual(commanded, 1, "hil_node logged the operator's goal")

            # The viewer's handshakes now share the machine with the others': it is given 30 s
            # for its first message (the wait ends as it comes).
            others = self.probes(unsecured=({"ROS_SECURITY_ENABLE": "false"}, ["--goal"]),
                                 foreign=(secured(self.foreign, "/arm_hil/operator"), ["--goal"]),
                                 viewer=(secured(self.keystore, "/arm_hil/viewer"), ["--goal", "--first-within", "30"]))
            unsecured, foreign, viewer = others["unsecured"], others["foreign"], others["viewer"]
            self.assertEqual((unsecured["server"], unsecured["joint_states_hz"]), (False, 0.0), unsecured)
            self.assertEqual((foreign["server"], foreign["joint_states_hz"]), (False, 0.0), foreign)
            self.assertIn("action client", viewer["refused"] or "", f"the viewer may not send goals: {viewer}")
            self.assertEqual(viewer["created"], [], f"nor joint commands or transitions: {viewer}")
            # At the publisher's rate, by the stamps (what the viewer receives a second varies with the load).
            self.assertAlmostEqual(viewer["joint_states_period_hz"], 250.0, delta=25.0,
                                   msg=f"the viewer reads /joint_states: {viewer}")
            self.assertEqual(self.goals_logged(hil.log_path), commanded, "no goal from the others reached hil_node")
        finally:
            stop(hil)

    def test_a_node_without_its_enclave_says_what_is_missing(self):
        lone = launch("hil.launch.py", "hardware:=sim", "enclave:=/arm_hil/no_such", "rsp:=false",
                      env=secured(self.keystore))
        said = wait_for_line(lone, "ROS_SECURITY_STRATEGY=Enforce", timeout=20)
        stop(lone)
        self.assertIsNotNone(said, lone.log_path.read_text()[-2000:])
        self.assertIn("enclave /arm_hil/no_such/hil_node (ROS_SECURITY_ENCLAVE_OVERRIDE) has no folder", said)

    def test_every_bringup_starts_under_enforce_with_the_policies_enclaves(self):
        """Each launch with what it starts beside its node (robot_state_publisher, a recording,
        ros2_control's processes): no process dies or is refused a topic, a service or an action
        its policy should grant."""
        stm32, (stm32_port,) = emulator("stm32")
        rdscom, (rdscom_port,) = emulator("rdscom")
        bringups = [
            ("sil.launch.py", "record:=true", f"bag:={LOGS / 'secured_sil_bag'}", "control:=ros2_control"),
            ("hil.launch.py", "hardware:=sim", "record:=true", f"bag:={LOGS / 'secured_hil_bag'}"),
            ("stm32.launch.py", f"port:={stm32_port}", LOADED_STM32_SILENCE),
            ("arduino.launch.py", f"port:={rdscom_port}", LOADED_MCU_HEARTBEAT),
            ("legacy_bridge.launch.py", "server_bind:=127.0.0.1:0"),
            ("vr_bridge.launch.py",),
        ]
        try:
            for file, *arguments in bringups:
                # Each enclave its own: an unsecured or foreign process is refused (Cyclone logs
                # "Remote secure participant ... not allowed"), one of these never.
                started = launch(file, *arguments, "enclave:=/arm_hil", env=secured(self.keystore))
                # The sil bringup's recorder is read below: it has taken both topics.
                ready = {"sil.launch.py": ("Configured and activated", "Subscribed to topic '/joint_states'",
                                           "Subscribed to topic '/tf'"),
                         "hil.launch.py": ("Recording...",),
                         "stm32.launch.py": ("now active",), "arduino.launch.py": ("now active",)}.get(file, ())
                for line in ready:
                    self.assertIsNotNone(wait_for_line(started, line, timeout=40), f"{file}: no '{line}'")
                if file == "sil.launch.py":
                    # Under Enforce each pair of participants' handshakes take seconds on a loaded
                    # machine: the recording goes on until the viewer, a participant newer than
                    # the recorder, gets the broadcaster's /joint_states and robot_state_publisher's
                    # /tf, then 3 s more for the recorder's own pairs.
                    viewer = self.probes(viewer=(secured(self.keystore, "/arm_hil/viewer"),
                                                 ["--read-only", "--seconds", "1", "--first-within", "30"]))["viewer"]
                    self.assertTrue(viewer["joint_states_hz"] > 0.0 and viewer["tf_messages"] > 0,
                                    f"no /joint_states or /tf under Enforce within 30 s: {viewer}")
                time.sleep(3.0)
                log = started.log_path.read_text()  # before the stop, whose SIGINT some processes die of
                stopped = stop(started)
                refused = [line for line in log.splitlines() if any(
                    word in line for word in ("process has died", "failed to create", "SECURITY ERROR", "rcl_init"))]
                self.assertFalse(refused, f"{file} under Enforce: {refused[:5]}")
                if file == "sil.launch.py":
                    recorded = collections.Counter(
                        topic for topic, _, _ in bag_messages(LOGS / "secured_sil_bag", ["/joint_states", "/tf"]))
                    self.assertTrue({"/joint_states", "/tf"} <= set(recorded),
                                    f"the recorder took the broadcaster's /joint_states and robot_state_publisher's "
                                    f"/tf: {dict(recorded)} (the launch ended with {stopped}; the viewer saw {viewer})")
        finally:
            stop(stm32)
            stop(rdscom)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("ip"), "two network namespaces need root and iproute2")
    def test_across_two_machines_the_operator_reads_and_commands_and_an_unsecured_laptop_sees_nothing(self):
        """tools/two_machines.sh with this keystore: sil.launch.py under Enforce on one network
        namespace, a laptop with only the operator's enclave on another, joined by a veth pair.
        The laptop sees the topics, /joint_states at 250 Hz and a parameter, and its goal reaches
        the node (refused there: it names no joints); an unsecured laptop sees an unsecured beacon and none of it."""
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
        script = subprocess.Popen(["bash", str(REPO / "tools" / "two_machines.sh")],
                                  env={**environment, "KEYSTORE": str(self.keystore)}, start_new_session=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            said, _ = script.communicate(timeout=400)
        except subprocess.TimeoutExpired:
            os.killpg(script.pid, signal.SIGTERM)  # its trap stops both machines and deletes the copied key
            said, _ = script.communicate(timeout=60)
        (LOGS / "two_machines.log").write_text(said)
        self.assertEqual(script.returncode, 0, said[-3000:])
        self.assertIn("0 joints named", said)
        self.assertIn("the beacon, none of the node's topics", said)

    def test_no_enclave_but_the_operators_may_publish_or_request_a_command(self):
        """The keystore's permissions as signed: only the operator may publish a command topic or
        request a command service; ros2_control's hardware commands the nodes it stands for, its
        spawners the controller manager."""
        commands = ["rt/hil_node/joint_command", "rt/hil_node/trajectory", "rt/stm32_driver/joint_trajectory",
                    "rt/stm32_driver/reset", "rt/arduino_driver/go", "rq/hil_node/change_stateRequest",
                    "rq/hil_node/set_parametersRequest", "rq/hil_node/follow_joint_trajectory/_action/send_goalRequest",
                    "rq/controller_manager/switch_controllerRequest", "rt/joint_trajectory_controller/joint_trajectory"]
        allowed = {"operator": commands,
                   "spawner": ["rq/controller_manager/switch_controllerRequest"],
                   "ros2_control": ["rt/hil_node/joint_command"]}
        for permissions in sorted((self.keystore / "enclaves" / "arm_hil").glob("*/permissions.xml")):
            enclave = permissions.parent.name
            root = ET.parse(permissions).getroot()
            granted, denied = [], []
            for rule, into in (("allow_rule", granted), ("deny_rule", denied)):
                for section in root.iter(rule):
                    into.extend(t.text for p in section.iter("publish") for t in p.iter("topic"))
            may = [c for c in commands if any(fnmatch.fnmatchcase(c, g) for g in granted)
                   and not any(fnmatch.fnmatchcase(c, d) for d in denied)]
            self.assertEqual(sorted(may), sorted(allowed.get(enclave, [])), enclave)

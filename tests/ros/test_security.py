"""DDS Security (SROS2), where sros2 is installed: hil.launch.py under `enclave:=/arm_hil` with
ROS_SECURITY_STRATEGY=Enforce, and the lab's clients as security_probe.py, each in its own
process and identity: the operator's goal moves the simulated arm; an unsecured client, one of a
foreign CA and the viewer get nothing through, and hil_node logs no goal from them; the viewer
reads /joint_states at the node's rate. The keystores are made for the run (tools/sros2_keystore.sh)."""

import json
import os
import pathlib
import re
import subprocess
import sys
import unittest

from test_nodes import LOGS, launch, stop, wait_for_line
from test_follow_joint_trajectory import installed

REPO = pathlib.Path(__file__).resolve().parents[2]
PROBE = pathlib.Path(__file__).with_name("security_probe.py")


def keystore(name, *policies):
    path = LOGS / name
    subprocess.run(["bash", str(REPO / "tools" / "sros2_keystore.sh"), str(path),
                    *[str(REPO / "security" / p) for p in policies]],
                   check=True, capture_output=True, timeout=300)
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
        cls.keystore = keystore("keystore", "hil.policy.xml", "clients.policy.xml")
        cls.foreign = keystore("foreign_keystore", "clients.policy.xml")

    def probe(self, name, env, goal=False):
        """What a client in `env` saw and did (security_probe.py)."""
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
        done = subprocess.run([sys.executable, str(PROBE), *(["--goal"] if goal else [])], env={**environment, **env},
                              capture_output=True, text=True, timeout=60)
        (LOGS / f"probe_{name}.log").write_text(done.stdout + done.stderr)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        self.assertTrue(lines, f"{name}: the probe said nothing: {done.stderr[-2000:]}")
        return json.loads(lines[-1])

    def goals_logged(self, log):
        """The goals hil_node logged, accepted or refused."""
        return len(set(re.findall(r"~/follow_\w+: goal (\S+)", log.read_text())))

    def test_under_enforce_only_the_operator_commands_and_the_viewer_reads(self):
        hil = launch("hil.launch.py", "hardware:=sim", "enclave:=/arm_hil", env=secured(self.keystore))
        try:
            self.assertTrue(wait_for_line(hil, "now active", timeout=30), hil.log_path.read_text()[-3000:])
            operator = self.probe("operator", secured(self.keystore, "/arm_hil/operator"), goal=True)
            self.assertTrue(operator["server"], operator)
            self.assertIsInstance(operator["goal"], dict, operator)
            self.assertEqual((operator["goal"]["status"], operator["goal"]["error_code"]), (4, 0), operator)
            self.assertGreater(operator["goal"]["moved"], 0.02, "the goal moved the arm")
            commanded = self.goals_logged(hil.log_path)
            self.assertEqual(commanded, 1, "hil_node logged the operator's goal")

            unsecured = self.probe("unsecured", {"ROS_SECURITY_ENABLE": "false"}, goal=True)
            self.assertEqual((unsecured["server"], unsecured["joint_states_hz"]), (False, 0.0), unsecured)
            foreign = self.probe("foreign", secured(self.foreign, "/arm_hil/operator"), goal=True)
            self.assertEqual((foreign["server"], foreign["joint_states_hz"]), (False, 0.0), foreign)
            viewer = self.probe("viewer", secured(self.keystore, "/arm_hil/viewer"), goal=True)
            self.assertIn("action client", viewer["refused"] or "", f"the viewer may not send goals: {viewer}")
            self.assertGreater(viewer["joint_states_hz"], 200.0, f"the viewer reads /joint_states: {viewer}")
            self.assertEqual(self.goals_logged(hil.log_path), commanded, "no goal from the others reached hil_node")
        finally:
            stop(hil)

    def test_a_node_without_its_enclave_says_what_is_missing(self):
        lone = launch("hil.launch.py", "hardware:=sim", "enclave:=/arm_hil/no_such", "rsp:=false",
                      env=secured(self.keystore))
        said = wait_for_line(lone, "ROS_SECURITY_STRATEGY=Enforce", timeout=20)
        stop(lone)
        self.assertIsNotNone(said, lone.log_path.read_text()[-2000:])
        self.assertIn("enclave /arm_hil/no_such/hil_node has no folder", said)

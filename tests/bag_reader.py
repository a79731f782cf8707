"""Bags written by `arm_hil sil --bag`, read back by independent readers from PyPI (mcap and
mcap-ros2-support): every message decodes, /joint_states equals the run's frames CSV, stamps
increase, and metadata.yaml matches the MCAP file.

    python3 tests/bag_reader.py path/to/arm_hil
"""

import csv
import math
import subprocess
import sys
import tempfile
import unittest
from collections import Counter, defaultdict
from pathlib import Path

import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

ARM_HIL = sys.argv.pop(1) if len(sys.argv) > 1 else "target/debug/arm_hil"
STREAMS = ("/joint_states", "/tf", "/clock", "/sil_node/end_effector", "/sil_node/reference", "/sil_node/state")


def stamp_ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class SilBag(unittest.TestCase):
    """A bag for Jazzy (`--bag-distro jazzy`): metadata version 9."""
    DISTRO = "jazzy"

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        work = Path(cls.work.name)
        cls.bag = work / "run"
        cls.frames_csv = work / "frames.csv"
        subprocess.run(
            [ARM_HIL, "sil", "--frame-rate", "250", "--bag-rate", "250", "--frames", str(cls.frames_csv),
             "--bag", str(cls.bag), "--bag-distro", cls.DISTRO],
            check=True, stdout=subprocess.DEVNULL)
        cls.metadata = yaml.safe_load((cls.bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
        cls.messages = defaultdict(list)
        cls.log_times = []
        with open(cls.bag / cls.metadata["relative_file_paths"][0], "rb") as file:
            reader = make_reader(file, decoder_factories=[DecoderFactory()])
            cls.header = reader.get_header()
            cls.summary = reader.get_summary()
            for schema, channel, message, decoded in reader.iter_decoded_messages():
                cls.messages[channel.topic].append((message, decoded))
                cls.log_times.append(message.log_time)
        with open(cls.frames_csv, newline="") as file:
            cls.frames = [{key: float(value) for key, value in row.items()} for row in csv.DictReader(file)]

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def test_the_file_is_a_ros2_mcap_of_cdr_messages_with_ros2msg_schemas(self):
        self.assertEqual(self.header.profile, "ros2")
        for channel in self.summary.channels.values():
            self.assertEqual(channel.message_encoding, "cdr")
            self.assertIn("offered_qos_profiles", channel.metadata)
        for schema in self.summary.schemas.values():
            self.assertEqual(schema.encoding, "ros2msg")

    def test_every_topic_decodes(self):
        expected = {"/joint_states", "/tf", "/tf_static", "/clock", "/diagnostics", "/robot_description",
                    "/sil_node/end_effector", "/sil_node/end_effector_twist", "/sil_node/reference",
                    "/sil_node/reference_path", "/sil_node/ideal", "/sil_node/current_direction",
                    "/sil_node/desired_direction", "/sil_node/state"}
        self.assertEqual(set(self.messages), expected)
        self.assertIn("<robot name=\"arm_hil\">", self.messages["/robot_description"][0][1].data)
        self.assertEqual(len(self.messages["/tf"][0][1].transforms), 14)
        self.assertGreater(len(self.messages["/sil_node/reference_path"][0][1].poses), 100)
        self.assertEqual(self.messages["/diagnostics"][-1][1].status[0].message, "run complete")

    def test_joint_states_equal_the_frames_csv(self):
        states = self.messages["/joint_states"]
        self.assertEqual(len(states), len(self.frames))
        t0 = 0.0
        for (message, state), frame in zip(states, self.frames):
            self.assertAlmostEqual(stamp_ns(state.header.stamp) * 1e-9, frame["t"] - t0, delta=1e-9)
            self.assertEqual(state.name[:3], ["joint1", "joint2", "joint3"])
            for i in range(3):
                self.assertEqual(state.position[i], frame[f"theta{i + 1}"])
                self.assertEqual(state.velocity[i], frame[f"theta{i + 1}_dot"])
                self.assertEqual(state.effort[i], frame[f"tau{i + 1}"])
            self.assertEqual(state.position[9:12], [frame["x"], frame["y"], frame["z"]])

    def test_state_is_the_frame_with_its_tracking_error(self):
        states = self.messages["/sil_node/state"]
        self.assertEqual(len(states), len(self.frames))
        for (_, state), frame in zip(states, self.frames):
            self.assertEqual(state.time, frame["t"])
            self.assertEqual([state.position.x, state.position.y, state.position.z], [frame["x"], frame["y"], frame["z"]])
            self.assertEqual(list(state.joint_efforts), [frame["tau1"], frame["tau2"], frame["tau3"]])
            error = [state.reference_position.x - state.position.x, state.reference_position.y - state.position.y,
                     state.reference_position.z - state.position.z]
            self.assertAlmostEqual(state.tracking_error_norm, math.hypot(*error), delta=1e-15)

    def test_stamps_increase_on_every_stream(self):
        for topic in STREAMS:
            stamps = [message.log_time for message, _ in self.messages[topic]]
            self.assertTrue(all(a < b for a, b in zip(stamps, stamps[1:])), topic)
        for message, state in self.messages["/joint_states"]:
            self.assertEqual(stamp_ns(state.header.stamp), message.log_time)
        clock = [stamp_ns(decoded.clock) for _, decoded in self.messages["/clock"]]
        self.assertEqual(clock, [message.log_time for message, _ in self.messages["/clock"]])

    def test_metadata_matches_the_file(self):
        metadata = self.metadata
        self.assertEqual(metadata["version"], 9)
        self.assertEqual(metadata["storage_identifier"], "mcap")
        self.assertEqual(metadata["ros_distro"], "jazzy")
        self.assert_topics_and_counts(metadata)
        listed = {t["topic_metadata"]["name"]: t for t in metadata["topics_with_message_count"]}
        latched = listed["/sil_node/reference_path"]["topic_metadata"]["offered_qos_profiles"]
        self.assertEqual(latched[0]["durability"], "transient_local")

    def assert_topics_and_counts(self, metadata):
        counts = Counter({topic: len(messages) for topic, messages in self.messages.items()})
        listed = {t["topic_metadata"]["name"]: t for t in metadata["topics_with_message_count"]}
        self.assertEqual({name: t["message_count"] for name, t in listed.items()}, dict(counts))
        types = {channel.topic: self.summary.schemas[channel.schema_id].name
                 for channel in self.summary.channels.values()}
        self.assertEqual({name: t["topic_metadata"]["type"] for name, t in listed.items()}, types)
        self.assertEqual(metadata["message_count"], sum(counts.values()))
        start, end = min(self.log_times), max(self.log_times)
        self.assertEqual(metadata["starting_time"]["nanoseconds_since_epoch"], start)
        self.assertEqual(metadata["duration"]["nanoseconds"], end - start)
        self.assertEqual(metadata["files"][0]["message_count"], sum(counts.values()))


class HumbleSilBag(SilBag):
    """The same run for Humble (`--bag-distro humble`): metadata version 5, each topic's QoS
    profiles one YAML string with rmw's policy numbers, in metadata.yaml and the MCAP channel."""
    DISTRO = "humble"

    def test_metadata_matches_the_file(self):
        metadata = self.metadata
        self.assertEqual(metadata["version"], 5)
        self.assertEqual(metadata["storage_identifier"], "mcap")
        self.assertNotIn("ros_distro", metadata)
        self.assert_topics_and_counts(metadata)
        listed = {t["topic_metadata"]["name"]: t["topic_metadata"] for t in metadata["topics_with_message_count"]}
        self.assertTrue(all("type_description_hash" not in t for t in listed.values()))
        latched = yaml.safe_load(listed["/sil_node/reference_path"]["offered_qos_profiles"])
        self.assertEqual((latched[0]["history"], latched[0]["durability"]), (1, 1), "keep_last, transient_local")
        for channel in self.summary.channels.values():
            self.assertIsInstance(yaml.safe_load(channel.metadata["offered_qos_profiles"])[0]["reliability"], int)


if __name__ == "__main__":
    unittest.main(verbosity=2)

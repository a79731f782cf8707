"""`arm_hil sil --live` watched by an independent client: PyPI's websockets speaking the Foxglove
WebSocket protocol (negotiated as foxglove.sdk.v1, the Foxglove SDK's name for the protocol
that was foxglove.websocket.v1) and mcap-ros2-support decoding the CDR payloads
against the schemas the server advertises. The client checks the advertised channels and
schemas, subscribes, decodes /joint_states and /tf at the run's rate, gets the latched URDF
after connecting late, gets the log lines on /rosout, and sees the run finish; a client that
never reads holds nothing up. `arm_hil serve --live` and `stm32 --live` likewise, with a
port-5555 client and the STM32 emulator.

    python3 tests/live_client.py path/to/arm_hil
"""

import asyncio
import json
import pathlib
import struct
import subprocess
import sys
import time
import unittest

import websockets
from mcap_ros2._dynamic import generate_dynamic

ARM_HIL = sys.argv.pop(1) if len(sys.argv) > 1 else "target/debug/arm_hil"
PROTOCOL = "foxglove.sdk.v1"
MESSAGE_DATA = 0x01


def start_live(*arguments):
    """`arm_hil sil --live 127.0.0.1:0 ...`; returns the process and its ws:// address."""
    process = subprocess.Popen([ARM_HIL, "sil", "--live", "127.0.0.1:0", *arguments], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    first = process.stdout.readline().strip()
    assert first.startswith("live on ws://"), first
    return process, first.removeprefix("live on ")


class Viewer:
    """One client: the channels the server advertised, and the decoded messages per topic."""

    def __init__(self, websocket):
        self.websocket = websocket
        self.channels = {}
        self.subscriptions = {}
        self.decoders = {}
        self.messages = {}

    async def advertised(self, topics, timeout=10.0):
        """Reads control messages until every topic in `topics` is advertised."""
        deadline = time.monotonic() + timeout
        while not topics <= {c["topic"] for c in self.channels.values()}:
            message = await asyncio.wait_for(self.websocket.recv(), deadline - time.monotonic())
            if isinstance(message, str):
                self.control(json.loads(message))

    def control(self, message):
        if message["op"] == "advertise":
            for channel in message["channels"]:
                self.channels[channel["id"]] = channel

    async def subscribe(self, topics):
        subscriptions = []
        for channel in self.channels.values():
            if channel["topic"] in topics:
                subscription = len(self.subscriptions) + 1
                self.subscriptions[subscription] = channel
                decoders = generate_dynamic(channel["schemaName"], channel["schema"])
                self.decoders[subscription] = decoders[channel["schemaName"]]
                subscriptions.append({"id": subscription, "channelId": channel["id"]})
        await self.websocket.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))

    async def read_until_closed(self, until=None):
        """Decodes message data until the server closes the connection (or `until()` holds)."""
        try:
            async for message in self.websocket:
                if isinstance(message, str):
                    self.control(json.loads(message))
                    continue
                if message[0] != MESSAGE_DATA:
                    continue
                subscription, log_time = struct.unpack_from("<IQ", message, 1)
                topic = self.subscriptions[subscription]["topic"]
                decoded = self.decoders[subscription](message[13:])
                self.messages.setdefault(topic, []).append((log_time, decoded))
                if until and until():
                    return
        except websockets.ConnectionClosed:
            pass


def stamp_s(stamp):
    return stamp.sec + stamp.nanosec * 1e-9


class LiveSil(unittest.TestCase):
    def test_the_run_is_served_with_the_bags_topics_and_schemas_and_decodes_at_its_rate(self):
        async def watch():
            process, address = start_live("--real-time-factor", "2")
            async with websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as websocket:
                viewer = Viewer(websocket)
                topics = {"/joint_states", "/tf", "/tf_static", "/robot_description", "/diagnostics",
                          "/sil_node/state", "/sil_node/reference_path", "/clock"}
                await viewer.advertised(topics)
                await viewer.subscribe({"/joint_states", "/tf", "/diagnostics", "/robot_description"})
                await viewer.read_until_closed()
            return process.wait(timeout=30), viewer

        status, viewer = asyncio.run(watch())
        self.assertEqual(status, 0)
        types = {c["topic"]: (c["schemaName"], c["encoding"], c["schemaEncoding"]) for c in viewer.channels.values()}
        self.assertEqual(types["/joint_states"], ("sensor_msgs/msg/JointState", "cdr", "ros2msg"))
        self.assertEqual(types["/tf"], ("tf2_msgs/msg/TFMessage", "cdr", "ros2msg"))
        self.assertEqual(types["/sil_node/state"][0], "arm_hil/msg/ArmState")
        states = [m for _, m in viewer.messages["/joint_states"]]
        self.assertEqual(states[0].name[:3], ["joint1", "joint2", "joint3"])
        # 250 samples per simulated second over the 9.86 s arc.
        stamps = [stamp_s(m.header.stamp) for m in states]
        rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
        self.assertAlmostEqual(rate, 250.0, delta=5.0)
        self.assertGreater(stamps[-1], 9.5)
        transforms = viewer.messages["/tf"]
        tf_stamps = [stamp_s(m.transforms[0].header.stamp) for _, m in transforms]
        self.assertAlmostEqual((len(tf_stamps) - 1) / (tf_stamps[-1] - tf_stamps[0]), 250.0, delta=5.0)
        self.assertIn('<robot name="arm_hil">', viewer.messages["/robot_description"][0][1].data)
        self.assertEqual(viewer.messages["/diagnostics"][-1][1].status[0].message, "run complete")

        # The layout in the repository shows what the run serves (hil_node's topics aside).
        layout = json.loads((pathlib.Path(__file__).parent.parent / "foxglove" / "arm_hil.json").read_text())
        shown = set()
        for panel in layout["configById"].values():
            shown |= set(panel.get("topics", {}))
            shown |= {path["value"].split(".")[0] for path in panel.get("paths", [])}
            shown |= {panel["topicToRender"]} if "topicToRender" in panel else set()
        self.assertLessEqual({t for t in shown if not t.startswith("/hil_node/")}, set(types))

    def test_a_client_that_connects_late_gets_the_latched_urdf_and_path_and_the_log_lines(self):
        async def watch():
            process, address = start_live("--real-time-factor", "2")
            await asyncio.sleep(2.0)
            latched = {"/robot_description", "/tf_static", "/sil_node/reference_path"}
            async with websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as websocket:
                viewer = Viewer(websocket)
                await viewer.advertised(latched | {"/rosout"})
                await viewer.subscribe(latched | {"/rosout"})
                await asyncio.wait_for(viewer.read_until_closed(until=lambda: latched <= set(viewer.messages)), 10.0)
                # Interrupted, the run logs why: the line comes on /rosout before the view closes.
                process.terminate()
                await asyncio.wait_for(viewer.read_until_closed(), 30.0)
            process.wait(timeout=30)
            return viewer

        viewer = asyncio.run(watch())
        self.assertIn('<robot name="arm_hil">', viewer.messages["/robot_description"][0][1].data)
        self.assertGreater(len(viewer.messages["/tf_static"][0][1].transforms), 0)
        self.assertGreater(len(viewer.messages["/sil_node/reference_path"][0][1].poses), 100)
        lines = [m for _, m in viewer.messages.get("/rosout", [])]
        self.assertTrue(any(m.msg.startswith("interrupted at") and m.level == 30 and m.name == "sil_node"
                            for m in lines), [m.msg for m in lines])

    def test_a_client_that_sends_garbage_is_answered_and_the_others_keep_their_stream(self):
        async def watch():
            process, address = start_live("--real-time-factor", "2")
            async with websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as rude, \
                    websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as polite:
                viewer = Viewer(polite)
                await viewer.advertised({"/joint_states"})
                await viewer.subscribe({"/joint_states"})
                replies = []
                for garbage in ["not json", json.dumps({"op": "no such operation"}), b"\x07\xff\x00"]:
                    await rude.send(garbage)
                    try:
                        while True:
                            reply = await asyncio.wait_for(rude.recv(), 2.0)
                            if isinstance(reply, str) and json.loads(reply)["op"] == "status":
                                replies.append(json.loads(reply))
                                break
                    except (asyncio.TimeoutError, websockets.ConnectionClosed):
                        break
                await viewer.read_until_closed(until=lambda: len(viewer.messages.get("/joint_states", [])) > 250)
            process.terminate()
            process.wait(timeout=30)
            return replies, viewer

        replies, viewer = asyncio.run(watch())
        self.assertTrue(replies, "the server said nothing to the garbage")
        self.assertTrue(all(reply["level"] >= 1 for reply in replies), replies)
        self.assertGreater(len(viewer.messages["/joint_states"]), 250, "the other client lost its stream")

    def test_a_viewer_that_never_reads_neither_holds_the_run_nor_its_end(self):
        """What it costs the run is measured by benches/live_stall.py, not here."""
        async def watch():
            process, address = start_live("--real-time-factor", "0", "--json")
            websocket = await websockets.connect(address, subprotocols=[PROTOCOL], max_size=None, max_queue=1)
            viewer = Viewer(websocket)
            await viewer.advertised({"/joint_states", "/tf", "/sil_node/state"})
            await viewer.subscribe({c["topic"] for c in viewer.channels.values()})
            status = await asyncio.to_thread(process.wait, 60)
            summary = json.loads(process.stdout.readline())
            await websocket.close()
            return status, summary

        status, summary = asyncio.run(watch())
        self.assertEqual(status, 0)
        self.assertGreater(summary["sim_time_s"], 9.5, "the run went to its end")


def last_session(diagnostics):
    """legacy_bridge's news of its last session, from a /diagnostics message."""
    values = {value.key: value.value for value in diagnostics.status[0].values}
    return values.get("last_session", "")


class LiveServe(unittest.TestCase):
    def test_a_port_5555_session_is_served_as_legacy_bridge_publishes_it(self):
        server = subprocess.Popen([ARM_HIL, "serve", "--bind", "127.0.0.1:0", "--live", "127.0.0.1:0"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        live = server.stdout.readline().strip()
        listening = server.stdout.readline().strip()
        self.assertTrue(live.startswith("live on ws://"), live)
        self.assertTrue(listening.startswith("listening on "), listening)
        address = live.removeprefix("live on ")
        client_command = [sys.executable, str(pathlib.Path(__file__).parent.parent / "examples" / "legacy_client.py"),
                          listening.removeprefix("listening on "),
                          str(pathlib.Path(__file__).parent.parent / "examples" / "arc_9deg.csv")]

        async def watch():
            async with websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as websocket:
                viewer = Viewer(websocket)
                topics = {"/joint_states", "/tf", "/robot_description", "/diagnostics", "/legacy_bridge/state"}
                await viewer.advertised(topics)
                await viewer.subscribe(topics)
                session = await asyncio.create_subprocess_exec(*client_command, stdout=subprocess.DEVNULL)
                await asyncio.wait_for(viewer.read_until_closed(until=lambda: any(
                    "complete" in last_session(m) for _, m in viewer.messages.get("/diagnostics", []))), 60.0)
                self.assertEqual(await session.wait(), 0)
            return viewer

        try:
            viewer = asyncio.run(watch())
        finally:
            server.terminate()
            server.wait(timeout=30)
        self.assertIn('<robot name="arm_hil">', viewer.messages["/robot_description"][0][1].data)
        states = [m for _, m in viewer.messages["/joint_states"]]
        self.assertEqual(list(states[0].name[:3]), ["joint1", "joint2", "joint3"])
        # The 10-degree arc takes about 2.6 s of session time, sampled at 250 Hz.
        self.assertGreater(len(states), 250)
        self.assertGreater(len(viewer.messages["/legacy_bridge/state"]), 250)
        self.assertGreater(len(viewer.messages["/tf"]), 250)
        # As legacy_bridge reports it: the server in the message, the sessions in the values.
        sessions = [last_session(m) for _, m in viewer.messages["/diagnostics"]]
        self.assertTrue(any("SIL session of" in session for session in sessions), sessions)
        self.assertTrue(all(m.status[0].message.startswith("listening on") for _, m in viewer.messages["/diagnostics"]))


class LiveDevice(unittest.TestCase):
    def test_the_stm32_session_is_served_as_stm32_driver_publishes_it(self):
        emulator = subprocess.Popen([ARM_HIL, "emulate", "stm32"], stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, text=True)
        port = emulator.stdout.readline().strip()
        driver = subprocess.Popen([ARM_HIL, "stm32", "--port", port, "--live", "127.0.0.1:0"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        address = driver.stdout.readline().strip().removeprefix("live on ")

        async def watch():
            async with websockets.connect(address, subprotocols=[PROTOCOL], max_size=None) as websocket:
                viewer = Viewer(websocket)
                await viewer.advertised({"/joint_states", "/stm32_driver/imu", "/diagnostics"})
                await viewer.subscribe({"/joint_states", "/stm32_driver/imu"})
                await asyncio.wait_for(viewer.read_until_closed(
                    until=lambda: len(viewer.messages.get("/joint_states", [])) > 20
                    and "/stm32_driver/imu" in viewer.messages), 20.0)
            return viewer

        try:
            viewer = asyncio.run(watch())
        finally:
            for process in (driver, emulator):
                process.terminate()
                process.wait(timeout=30)
        self.assertEqual(list(viewer.messages["/joint_states"][-1][1].name), ["stm32_shoulder", "stm32_elbow"])
        self.assertEqual(viewer.messages["/stm32_driver/imu"][-1][1].header.frame_id, "stm32_imu_link")


if __name__ == "__main__":
    unittest.main(verbosity=2)

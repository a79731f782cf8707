"""What a live viewer that never reads costs `arm_hil sil --live`: runs with a live view and no
client alternate with runs whose client subscribes to every topic and then reads nothing, so
that the machine's drift falls on both alike. Prints the medians of the run's own wall time and
peak memory (from `--json`), and the median of the pairs' ratios.

    cargo build --release && python3 benches/live_stall.py [PAIRS] [REAL_TIME_FACTOR]
"""

import asyncio
import json
import os
import statistics
import subprocess
import sys

import websockets

ARM_HIL = os.environ.get("ARM_HIL", "target/release/arm_hil")
PROTOCOL = "foxglove.sdk.v1"


async def run(stalled, factor):
    process = await asyncio.create_subprocess_exec(
        ARM_HIL, "sil", "--live", "127.0.0.1:0", "--real-time-factor", factor, "--json",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    address = (await process.stdout.readline()).decode().strip().removeprefix("live on ")
    websocket = None
    if stalled:
        websocket = await websockets.connect(address, subprotocols=[PROTOCOL], max_size=None, max_queue=1)
        channels = []
        while len(channels) < 10:
            message = json.loads(await websocket.recv())
            if message["op"] == "advertise":
                channels += message["channels"]
        subscriptions = [{"id": i + 1, "channelId": c["id"]} for i, c in enumerate(channels)]
        await websocket.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
    summary = json.loads((await process.stdout.readline()).decode())
    await process.wait()
    if websocket:
        websocket.transport.abort()
    return summary["wall_time_s"], summary["peak_rss_kib"]


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    factor = sys.argv[2] if len(sys.argv) > 2 else "0"
    results = [(asyncio.run(run(False, factor)), asyncio.run(run(True, factor))) for _ in range(pairs)]
    free = [r[0] for r in results]
    stalled = [r[1] for r in results]
    ratio = statistics.median(s[0] / f[0] for f, s in results)
    print(f"{pairs} pairs, --real-time-factor {factor}: run {statistics.median(t for t, _ in free):.3f} s "
          f"with no client, {statistics.median(t for t, _ in stalled):.3f} s with a client that never reads "
          f"(medians); ratio {ratio:.3f} (median of the pairs); peak memory {max(m for _, m in free)} KiB "
          f"and {max(m for _, m in stalled)} KiB (largest)")


if __name__ == "__main__":
    main()

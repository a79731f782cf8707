#!/usr/bin/env python3
"""A port-5555 client, written from docs/port5555.md: the lab GUI's role.

Sends a trajectory CSV (header t,x,y,z,xd,yd,zd,xdd,ydd,zdd) to a server, reads the response as
the GUI does (SIL: a 12-byte header, 128-byte frames until one has t >= end_time, then n 80-byte
ideal blocks; HIL: no header, frames from the first byte until one has t >= the last waypoint's t)
and prints what it received as one JSON object. Standard library only.

    python3 examples/legacy_client.py 127.0.0.1:5555 examples/arc_9deg.csv
"""

import argparse
import csv
import json
import socket
import struct
import sys

HEADER = struct.Struct("<di")  # end_time, n
PREFIX = struct.Struct("<i4d")  # n, elbow x/y/z, l_arm
WAYPOINT = struct.Struct("<10d")  # t, x[3], x_dot[3], x_ddot[3]
FRAME = struct.Struct("<16d")  # t, x[3], x_dot[3], theta[3], theta_dot[3], tau[3]
IDEAL = struct.Struct("<10d")  # t, theta[3], theta_dot[3], tau_ideal[3]


def read_exact(sock, size):
    chunks = []
    while size:
        chunk = sock.recv(min(size, 1 << 16))
        if not chunk:
            raise EOFError("the server closed the connection early")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def device_field(name):
    raw = name.encode()
    return bytes([len(raw)]) + raw


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", help="HOST:PORT of the server")
    parser.add_argument("trajectory", help="trajectory CSV")
    parser.add_argument("--mode", choices=["S", "H"], default="S")
    parser.add_argument("--sensor", default="", help="HIL sensor device (empty: server default)")
    parser.add_argument("--arduino", default="", help="HIL Arduino device (empty: auto)")
    parser.add_argument("--elbow", default="0.35,0.35,0.0", help="elbow x,y,z [m]")
    parser.add_argument("--l-arm", type=float, default=0.45, help="forearm length [m]")
    args = parser.parse_args()

    with open(args.trajectory, newline="") as handle:
        rows = [[float(row[key]) for key in ("t", "x", "y", "z", "xd", "yd", "zd", "xdd", "ydd", "zdd")]
                for row in csv.DictReader(handle)]
    elbow = [float(v) for v in args.elbow.split(",")]

    request = args.mode.encode()
    if args.mode == "H":
        request += device_field(args.sensor) + device_field(args.arduino)
    request += PREFIX.pack(len(rows), *elbow, args.l_arm)
    request += b"".join(WAYPOINT.pack(*row) for row in rows)

    host, port = args.address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(request)
        if args.mode == "S":
            end_time, n = HEADER.unpack(read_exact(sock, HEADER.size))
        else:
            end_time, n = rows[-1][0], len(rows)
        frames, increasing, last_t = 0, True, float("-inf")
        while True:
            frame = FRAME.unpack(read_exact(sock, FRAME.size))
            if frame[0] >= end_time:
                marker = frame
                break
            increasing &= frame[0] > last_t
            last_t = frame[0]
            frames += 1
        ideal = [IDEAL.unpack(read_exact(sock, IDEAL.size)) for _ in range(n if args.mode == "S" else 0)]
        eof = sock.recv(1) == b""

    json.dump({
        "end_time": end_time,
        "n": n,
        "frames": frames,
        "increasing_t": increasing,
        "last_frame_t": last_t,
        "end_marker_t": marker[0],
        "end_marker_tau": list(marker[13:16]),
        "ideal_blocks": len(ideal),
        "first_ideal": list(ideal[0]) if ideal else None,
        "eof": eof,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()

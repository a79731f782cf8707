#!/usr/bin/env python3
"""What DDS Security costs (docs/performance.md): hil.launch.py on the simulated rig (no
robot_state_publisher), plain and under `enclave:=/arm_hil` with Enforce, each for `SECONDS`:
hil_node's CPU (user and system time over wall time, from /proc) and the rate at which a client
gets /joint_states (security_probe.py: unsecured for the plain run, the viewer's enclave for the
secured one). A benchmark, not a test: it prints figures and asserts nothing. `ARM_HIL_RMW`
picks the middleware, as for the suite.

    tests/ros/run.sh --benchmark security
"""

import json
import os
import subprocess
import sys
import time

from test_nodes import launch, stop, stop_all, wait_for_line
from test_security import PROBE, keystore, secured

SECONDS = 10.0
RUNS = 3


def cpu_seconds(pid):
    """User and system time of the process `pid` so far [s]."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hil_node_pid():
    found = subprocess.run(["pgrep", "-f", "lib/arm_hil/hil_node"], capture_output=True, text=True).stdout.split()
    return int(found[0])


def measure(env, probe_env):
    """hil_node's share of a core and a client's /joint_states rate, with the launch in `env`."""
    hil = launch("hil.launch.py", "hardware:=sim", "rsp:=false", *(["enclave:=/arm_hil"] if env else []), env=env)
    try:
        if wait_for_line(hil, "now active", timeout=30) is None:
            sys.exit(f"hil_node did not start: {hil.log_path}")
        time.sleep(2.0)
        pid = hil_node_pid()
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ROS_SECURITY_")}
        probe = subprocess.Popen([sys.executable, str(PROBE), "--seconds", str(SECONDS)], env={**environment, **probe_env},
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        cpu, wall = cpu_seconds(pid), time.monotonic()
        time.sleep(SECONDS)
        share = (cpu_seconds(pid) - cpu) / (time.monotonic() - wall)
        seen = json.loads([line for line in probe.communicate(timeout=60)[0].splitlines() if line.startswith("{")][-1])
        return share, seen["joint_states_hz"]
    finally:
        stop(hil)


def main():
    store = keystore("benchmark_keystore", "hil.policy.xml", "clients.policy.xml")
    conditions = [("plain", {}, {"ROS_SECURITY_ENABLE": "false"}),
                  ("Enforce", secured(store), secured(store, "/arm_hil/viewer"))]
    print(f"middleware: {os.environ.get('RMW_IMPLEMENTATION')}; {RUNS} runs of {SECONDS:.0f} s each")
    print("| condition | hil_node CPU [% of a core] | /joint_states at a client [Hz] |")
    print("|---|---|---|")
    for name, env, probe_env in conditions:
        figures = sorted(measure(env, probe_env) for _ in range(RUNS))
        median = figures[len(figures) // 2]
        print(f"| {name} | {100 * median[0]:.1f} (runs {', '.join(f'{100 * f[0]:.1f}' for f in figures)}) "
              f"| {median[1]:.1f} (runs {', '.join(f'{f[1]:.1f}' for f in figures)}) |", flush=True)
    stop_all()


if __name__ == "__main__":
    main()

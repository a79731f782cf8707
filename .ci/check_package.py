"""Checks of the ROS package files that need no ROS: the launch files compile, package.xml and
the URDF are well-formed XML, and every URDF joint refers to links that exist."""

import pathlib
import py_compile
import sys
import xml.etree.ElementTree as ET

root = pathlib.Path(__file__).resolve().parent.parent
problems = []

for launch in sorted((root / "launch").glob("*.py")):
    try:
        py_compile.compile(str(launch), doraise=True)
    except py_compile.PyCompileError as error:
        problems.append(f"{launch.name}: {error.msg}")

package = ET.parse(root / "package.xml").getroot()
if package.get("format") != "3" or package.findtext("name") != "arm_hil":
    problems.append("package.xml: expected format 3 and name arm_hil")

for urdf in sorted((root / "urdf").glob("*.urdf")):
    robot = ET.parse(urdf).getroot()
    links = {link.get("name") for link in robot.iter("link")}
    for joint in robot.iter("joint"):
        for end in ("parent", "child"):
            link = joint.find(end).get("link")
            if link not in links:
                problems.append(f"{urdf.name}: joint {joint.get('name')} has {end} {link}, which is not a link")

for problem in problems:
    print(problem)
print(f"package checks: {len(problems)} problems")
sys.exit(1 if problems else 0)

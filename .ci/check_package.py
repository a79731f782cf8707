"""Checks of the ROS package files that need no ROS: the launch files compile, package.xml and
the URDF are well-formed XML, every URDF joint refers to links that exist, every parameter
file types its values as rcl will read them, and no file cites a document outside the
repository."""

import pathlib
import py_compile
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import yaml

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
    for joint in robot.findall("joint"):
        for end in ("parent", "child"):
            link = joint.find(end).get("link")
            if link not in links:
                problems.append(f"{urdf.name}: joint {joint.get('name')} has {end} {link}, which is not a link")

# rcl reads parameter files with its own YAML 1.1 typing of plain (unquoted) scalars, whatever
# a YAML 1.2 library says: y/n/yes/no/on/off in any of their spellings are booleans, then what
# strtoll reads whole is an integer, then what strtod reads whole is a double; quoted scalars are
# strings. A sequence whose items are not all of one type is refused ("Sequence should be of same
# type"), and the node cannot start.
RCL_TRUE = {"Y", "y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"}
RCL_FALSE = {"N", "n", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"}
RCL_SPECIAL_DOUBLES = {sign + inf for sign in ("", "+", "-") for inf in (".inf", ".Inf", ".INF")} | {
    ".nan", ".NaN", ".NAN"}


def rcl_scalar_type(node):
    if node.style in ("'", '"'):
        return "string"
    text = node.value
    if text in RCL_TRUE or text in RCL_FALSE:
        return "bool"
    try:
        int(text, 0)
        return "integer"
    except ValueError:
        pass
    if text in RCL_SPECIAL_DOUBLES:
        return "double"
    try:
        float(text)
        return "double"
    except ValueError:
        return "string"


def check_sequences(node, path):
    """Walks a composed YAML node and reports each sequence rcl would refuse."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            check_sequences(value, f"{path}.{key.value}" if path else key.value)
    elif isinstance(node, yaml.SequenceNode):
        kinds = [rcl_scalar_type(item) if isinstance(item, yaml.ScalarNode) else "non-scalar" for item in node.value]
        if len(set(kinds)) > 1:
            problems.append(f"{path}: rcl reads this sequence as mixed types {kinds}; quote the strings")
        if not kinds:
            problems.append(f"{path}: rcl cannot type an empty sequence")


for params in sorted((root / "config").glob("*.yaml")):
    document = yaml.compose(params.read_text(encoding="utf-8"))
    if not isinstance(document, yaml.MappingNode):
        problems.append(f"{params.name}: not a mapping")
        continue
    for node_key, node_value in document.value:
        sections = {key.value: value for key, value in node_value.value}
        if "ros__parameters" not in sections:
            problems.append(f"{params.name}: {node_key.value} has no ros__parameters")
            continue
        before = len(problems)
        check_sequences(sections["ros__parameters"], "")
        problems[before:] = [f"{params.name}: {problem}" for problem in problems[before:]]

# The project stands on its own: its design and protocols are in docs/. The lab's original
# documents may be named as sources there, nowhere else; nothing may point at the folder the
# project grew up beside (the patterns are split so that this file does not match itself).
outside = re.compile("shared" "/" + "|" + "DESIGN" r"\.md")
lab_documents = re.compile(r"\b(port5555_binary_protocol|stm32_serial_protocol|rdscom_messages|"
                           r"deltarobot_vr_protocol|control_architecture)\.md")
tracked = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
for name in filter(None, tracked.decode().split("\0")):
    path = root / name
    if not path.is_file():
        continue
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        continue
    for number, line in enumerate(text.splitlines(), 1):
        if outside.search(line) or (lab_documents.search(line) and not name.startswith("docs/")):
            problems.append(f"{name}:{number}: cites a document outside the repository: {line.strip()[:80]}")

for problem in problems:
    print(problem)
print(f"package checks: {len(problems)} problems")
sys.exit(1 if problems else 0)

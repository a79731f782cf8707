"""Shared by the launch files: one node with its parameter file (launch arguments that override
single parameters come last), and for each device the bringup around it:

- `namespace:=NS` puts the node and its robot_state_publisher under /NS; the frames of the
  device's URDF and of its messages get the prefix NS/ on the global /tf.
- `rsp:=true` (default) starts robot_state_publisher on the device's URDF, publishing /tf with
  every joint_states message, at the node's publish rate; `rviz:=true` starts rviz2 with a configuration pointed at this node,
  namespace and frames; `record:=true bag:=DIR` records the node's topics with /tf, /tf_static,
  robot_description, /diagnostics and /rosout.

robot_state_publisher and rviz2 are optional: where one is not installed, the launch says so in
one line and starts the rest. A recording needs ros2bag: without it nothing is started.
"""

import os
import re
import tempfile
import xml.etree.ElementTree as ET

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

SHARE = get_package_share_directory("arm_hil")


def node_launch(executable, overrides):
    """A launch description for `executable` alone: `params_file` (config/EXECUTABLE.yaml by
    default), `use_sim_time`, and one launch argument per entry of `overrides`
    (name: (default, type, help))."""
    return LaunchDescription(node_arguments(executable, overrides) + [node(executable, overrides)])


def node_arguments(executable, overrides, config=None):
    default_params = os.path.join(SHARE, "config", config or f"{executable}.yaml")
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description=f"{executable} parameters"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
    ]
    for name, (default, _, help_text) in overrides.items():
        arguments.append(DeclareLaunchArgument(name.replace(".", "_"), default_value=default, description=help_text))
    return arguments


def node(executable, overrides, namespace="", frames=None):
    """The node, with its parameter file, then the overrides, then `frames` (parameter: value)."""
    parameters = {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)}
    for name, (_, kind, _) in overrides.items():
        parameters[name] = ParameterValue(LaunchConfiguration(name.replace(".", "_")), value_type=kind)
    parameters.update(frames or {})
    return Node(
        package="arm_hil",
        executable=executable,
        name=executable,
        namespace=namespace,
        output="screen",
        parameters=[LaunchConfiguration("params_file"), parameters],
    )


class Device:
    """How a device is brought up beside its node.

    urdf: the file in urdf/; lengths: launch argument -> (link, joint, default [m], help), the
    link lying along its own +x from its joint to `joint`, where the next link hangs; rate: the
    launch argument that is the node's publish rate (robot_state_publisher's publish_frequency);
    frames: node parameter -> the frame it names (given the namespace's prefix); rviz: the
    configuration in rviz/ and the node its topics are written for; config: the parameter file
    in config/ (default EXECUTABLE.yaml); bag: the recording's default directory."""

    def __init__(self, urdf, rate, frames, rviz, bag, lengths=None, config=None):
        self.urdf, self.rate, self.frames, self.rviz, self.bag = urdf, rate, frames, rviz, bag
        self.lengths, self.config = lengths or {}, config


def ARM(**settings):  # noqa: N802 (a Device, as its callers read it)
    """The parallel arm (sil_node, hil_node): urdf/arm_hil.urdf, published at publish_rate_hz,
    points in base_link, rviz/arm_hil.rviz (written for sil_node)."""
    return Device(urdf="arm_hil.urdf", rate="publish_rate_hz", frames={"frame_id": "base_link"},
                  rviz=("arm_hil.rviz", "sil_node"), **settings)


def bringup(executable, overrides, device):
    """The launch description of `executable` (as `node_launch`) with the bringup of `device`."""
    arguments = node_arguments(executable, overrides, device.config) + [
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the node, its topics and frames (NS/ on /tf)"),
        DeclareLaunchArgument("rsp", default_value="true", description="start robot_state_publisher (/tf at the publish rate)"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2"),
        DeclareLaunchArgument("rviz_config", default_value=os.path.join(SHARE, "rviz", device.rviz[0]),
                              description="rviz2 configuration (its topics and frames follow the namespace)"),
        DeclareLaunchArgument("record", default_value="false", description="record the node's topics with ros2 bag"),
        DeclareLaunchArgument("bag", default_value=device.bag, description="output directory of the recording"),
    ]
    for name, (_, _, default, help_text) in device.lengths.items():
        arguments.append(DeclareLaunchArgument(name, default_value=str(default), description=f"{help_text} [m]"))
    return LaunchDescription(arguments + [OpaqueFunction(function=start, args=[executable, overrides, device])])


def value(context, name):
    return LaunchConfiguration(name).perform(context)


def switched_on(context, name):
    return value(context, name).lower() in ("true", "1", "yes")


def start(context, executable, overrides, device):
    """What to start, decided before anything starts."""
    namespace = value(context, "namespace").strip("/")
    prefix = f"{namespace}/" if namespace else ""
    ns = f"/{namespace}" if namespace else ""
    frames = {parameter: prefix + frame for parameter, frame in device.frames.items()}
    driver = node(executable, overrides, namespace, frames)
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    robot_state_publisher = Node(
        package="robot_state_publisher",
        executable="robot_state_publisher",
        namespace=namespace,
        output="screen",
        parameters=[{
            "robot_description": robot_description(context, device),
            "publish_frequency": rsp_frequency(float(value(context, device.rate))),
            "frame_prefix": prefix,
            "use_sim_time": use_sim_time,
        }],
    )
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        namespace=namespace,
        arguments=["-d", rviz_config(context, executable, device, ns, prefix)],
        parameters=[{"use_sim_time": use_sim_time}],
    )
    private = f"{ns}/{executable}/"
    topics = "|".join([f"{private}.*", f"{ns}/joint_states", f"{ns}/robot_description", "/clock", "/tf",
                       "/tf_static", "/diagnostics", "/rosout"])
    # MCAP on every distro: Humble's rosbag2 would write SQLite by default.
    record = ExecuteProcess(
        cmd=["ros2", "bag", "record", "-s", "mcap", "-o", LaunchConfiguration("bag"), "--regex", f"^({topics})$"],
        output="screen",
    )
    return select(context, driver, {
        "rsp": (robot_state_publisher, "robot_state_publisher", False),
        "rviz": (rviz, "rviz2", False),
        "record": (record, "ros2bag", True),
    })


def rsp_frequency(rate_hz):
    """robot_state_publisher's publish_frequency for joint states at `rate_hz`: it drops a
    message stamped less than 1/frequency (in whole milliseconds) after the last it published,
    so at the rate itself the stamps' jitter would lose a third of them; at twice the rate (its
    limit is 1000) every message becomes /tf."""
    return min(2.0 * rate_hz, 1000.0)


def root_link(context, device):
    """The link of the device's URDF that hangs from no joint: rviz's fixed frame."""
    robot = ET.fromstring(robot_description(context, device))
    children = {joint.find("child").get("link") for joint in robot.iter("joint")}
    return next(link.get("name") for link in robot.iter("link") if link.get("name") not in children)


def robot_description(context, device):
    """The device's URDF, with the link lengths the launch arguments give."""
    robot = ET.parse(os.path.join(SHARE, "urdf", device.urdf)).getroot()
    for argument, (link_name, joint_name, _, _) in device.lengths.items():
        length = float(value(context, argument))
        link = robot.find(f"link[@name='{link_name}']")
        for visual in link.iter("visual"):
            visual.find("origin").set("xyz", f"{length / 2} 0 0")
            visual.find("geometry/cylinder").set("length", str(length))
        robot.find(f"joint[@name='{joint_name}']/origin").set("xyz", f"{length} 0 0")
    return ET.tostring(robot, encoding="unicode")


def rviz_config(context, executable, device, ns, prefix):
    """The device's rviz configuration, its topics and frames moved to this node and namespace
    (written for `device.rviz[1]` in the root namespace)."""
    with open(value(context, "rviz_config"), encoding="utf-8") as config:
        text = config.read()
    written_for = device.rviz[1]
    text = text.replace(f"/{written_for}/", f"{ns}/{executable}/")
    text = text.replace("Value: /robot_description", f"Value: {ns}/robot_description")
    text = text.replace("TF Prefix: \"\"", f"TF Prefix: \"{prefix.rstrip('/')}\"")
    text = re.sub(r"Fixed Frame: .*", f"Fixed Frame: {prefix}{root_link(context, device)}", text)
    handle, path = tempfile.mkstemp(prefix=f"arm_hil_{executable}_", suffix=".rviz")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def installed(package):
    try:
        get_package_share_directory(package)
        return True
    except PackageNotFoundError:
        return False


def select(context, main, optional):
    """Each switched-on action whose package is installed, beside `main`; a missing optional
    package is a one-line note, a missing required one ends the launch with its name and
    nothing started."""
    actions = [main]
    for switch, (action, package, required) in optional.items():
        if not switched_on(context, switch):
            continue
        if installed(package):
            actions.append(action)
        elif required:
            return [LogInfo(msg=f"{switch}:=true needs the package {package}, which is not installed: nothing started"),
                    Shutdown(reason=f"{package} is not installed")]
        else:
            actions.append(LogInfo(msg=f"{package} is not installed: not started ({switch}:=false silences this)"))
    return actions

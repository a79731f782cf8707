"""Shared by the launch files: one node with its parameter file, and for each device the bringup
around it.

- Parameters come from `params_file` (the package's config/NODE.yaml unless given). A launch
  argument that names a parameter overrides it only when it is given on the command line; not
  given, the parameter file decides (`--show-args` says so, with the package file's value).
- `namespace:=NS` puts the node (and its robot_state_publisher) under /NS; the frames of the
  device's URDF and of its messages get the prefix NS/ on the global /tf.
- `rsp:=true` (default, devices with a URDF) starts robot_state_publisher on the device's URDF,
  publishing /tf with every joint_states message, at the node's publish rate; `rviz:=true`
  starts rviz2 with a configuration pointed at this node, namespace and frames.
- `record:=true` records the node's topics with /tf, /tf_static, robot_description,
  /diagnostics and /rosout as MCAP, into `bag:=DIR` or, not given, a new folder
  $ROS_HOME/bags/DEVICE_<UTC start> (ROS_HOME defaults to ~/.ros).
- `enclave:=ROOT` (DDS Security, docs/security.md) runs each process it starts in an enclave
  under ROOT: the node in ROOT/EXECUTABLE, robot_state_publisher in ROOT/robot_state_publisher,
  the recording in ROOT/recorder, ros2_control_node in ROOT/ros2_control, its spawners in
  ROOT/spawner, rviz2 in ROOT/viewer; security on, Enforce. Empty (default): the environment
  decides, as for any ROS 2 process. Not with `namespace:=` (the policies name root topics).

robot_state_publisher and rviz2 are optional: where one is not installed, the launch says so in
one line and starts the rest. A recording needs ros2bag and rosbag2_storage_mcap: without them
the launch says which is missing in one line and starts nothing.
"""

import datetime
import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET

import control
import yaml
from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

SHARE = get_package_share_directory("arm_hil")

# The value of a launch argument that was not given: the parameter file decides.
NOT_GIVEN = "(params_file)"


def argument(name):
    """The launch argument of the parameter `name` (`link.baud` -> `link_baud`)."""
    return name.replace(".", "_")


def file_parameters(path):
    """The parameters a ROS parameter file gives every node (`/**`), flattened to dotted names."""
    with open(path, encoding="utf-8") as file:
        document = yaml.safe_load(file) or {}
    flat = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}{key}.", item)
        else:
            flat[prefix[:-1]] = value

    for section in document.values():
        walk("", (section or {}).get("ros__parameters", {}))
    return flat


def node_arguments(executable, overrides, config=None):
    """`params_file`, `use_sim_time`, and one argument per entry of `overrides` (parameter name:
    (type, help)), each given or not."""
    default_params = os.path.join(SHARE, "config", config or f"{executable}.yaml")
    package_values = file_parameters(default_params)
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description=f"{executable} parameters"),
        DeclareLaunchArgument("use_sim_time", default_value=NOT_GIVEN, description="follow /clock"),
    ]
    for name, (_, help_text) in overrides.items():
        shown = package_values.get(name, "the node's own default")
        description = f"{help_text}; not given: params_file decides (the package's: {shown})"
        arguments.append(DeclareLaunchArgument(argument(name), default_value=NOT_GIVEN, description=description))
    return arguments


def value(context, name):
    return LaunchConfiguration(name).perform(context)


def switched_on(context, name):
    return value(context, name).lower() in ("true", "1", "yes")


def given(context, name):
    """The launch argument of the parameter `name`, if it was given."""
    text = value(context, argument(name))
    return None if text == NOT_GIVEN else text


def effective(context, name):
    """What the node will have for the parameter `name`: the launch argument if given, else the
    parameter file's value, else None (the node's own default)."""
    text = given(context, name)
    if text is not None:
        return text
    return file_parameters(value(context, "params_file")).get(name)


def enclave(context, name):
    """What makes a process run in the enclave ROOT/`name` of `enclave:=ROOT` (DDS Security),
    secured and enforced: rcl's override of the enclave, which ROS 2 processes of every kind
    (Rust, C++, Python, the `ros2` command line) take, with security on and Enforce, so that a
    missing keystore or enclave stops the process rather than letting it run open. Nothing when
    no enclave root is given: the environment decides, as for any ROS 2 process."""
    root = LaunchConfiguration("enclave", default="").perform(context).rstrip("/")
    if not root:
        return {}
    return {"additional_env": {"ROS_SECURITY_ENCLAVE_OVERRIDE": f"{root}/{name}", "ROS_SECURITY_ENABLE": "true",
                               "ROS_SECURITY_STRATEGY": "Enforce"}}


def enclave_refusal(context):
    """Why `enclave:=` cannot be taken as given, or None: the root is an absolute path, and the
    policies (security/) name the root namespace's topics."""
    root = LaunchConfiguration("enclave", default="").perform(context)
    if root and not root.startswith("/"):
        return f"enclave:={root} is not an enclave path: it starts with / (enclave:=/arm_hil)"
    if root and LaunchConfiguration("namespace", default="").perform(context).strip("/"):
        return "enclave:= with namespace:= is not supported: security/'s policies name the root namespace's topics"
    return None


def node(context, executable, overrides, namespace="", fixed=None, remappings=()):
    """The node with its parameter file, then the launch arguments given, then `fixed`
    (parameter: value: its frames under a namespace, what ros2_control needs)."""
    parameters = {}
    for name, (kind, _) in [("use_sim_time", (bool, ""))] + list(overrides.items()):
        if given(context, name) is not None:
            parameters[name] = ParameterValue(LaunchConfiguration(argument(name)), value_type=kind)
    parameters.update(fixed or {})
    return Node(
        package="arm_hil",
        executable=executable,
        name=executable,
        namespace=namespace,
        output="screen",
        parameters=[LaunchConfiguration("params_file"), parameters],
        remappings=list(remappings),
        **enclave(context, executable),
    )


class Device:
    """How a device is brought up beside its node.

    urdf: the file in urdf/ (None: a bridge, no robot_state_publisher or rviz); lengths: launch
    argument -> (link, joint, default [m], help), the link lying along its own +x from its joint
    to `joint`, where the next link hangs; rate: the parameter that is the node's publish rate
    (robot_state_publisher's publish_frequency); frames: node parameter -> the frame it names,
    given the namespace's prefix under a namespace; rviz: the configuration in rviz/ and the node
    its topics are written for; config: the parameter file in config/ (default EXECUTABLE.yaml);
    bag: the name of the recording's folders; topics: what a recording takes besides the node's
    private topics; controllers: the controllers file in config/ of `control:=ros2_control`
    (launch/control.py), whose hardware the URDF's ros2_control block names; under it the node's
    `ros2_control` parameter is true."""

    def __init__(self, bag, urdf=None, rate=None, frames=None, rviz=None, lengths=None, config=None,
                 topics=("joint_states", "robot_description"), controllers=None):
        self.urdf, self.rate, self.frames, self.rviz, self.bag = urdf, rate, frames or {}, rviz, bag
        self.lengths, self.config, self.topics, self.controllers = lengths or {}, config, topics, controllers


def ARM(**settings):  # noqa: N802 (a Device, as its callers read it)
    """The parallel arm (sil_node, hil_node): urdf/arm_hil.urdf, published at publish_rate_hz,
    points in base_link, rviz/arm_hil.rviz (written for sil_node), its motors under ros2_control
    with config/arm_controllers.yaml."""
    return Device(urdf="arm_hil.urdf", rate="publish_rate_hz", frames={"frame_id": "base_link"},
                  rviz=("arm_hil.rviz", "sil_node"), controllers="arm_controllers.yaml", **settings)


def BRIDGE(bag):  # noqa: N802 (a Device, as its callers read it)
    """A bridge (legacy_bridge, vr_bridge): a node and its topics, no URDF."""
    return Device(bag=bag, topics=("joint_states",))


def bringup(executable, overrides, device):
    """The launch description of `executable` with the bringup of `device`."""
    arguments = node_arguments(executable, overrides, device.config) + [
        DeclareLaunchArgument("namespace", default_value="", description="namespace of the node, its topics and frames (NS/ on /tf)"),
        DeclareLaunchArgument("record", default_value="false", description="record the node's topics with ros2 bag (MCAP)"),
        DeclareLaunchArgument("bag", default_value="", description=f"the recording's folder; empty: $ROS_HOME/bags/{device.bag}_<UTC start>"),
        DeclareLaunchArgument("enclave", default_value="", description="DDS Security: each process in an enclave under this root "
                              "(/arm_hil: /arm_hil/NODE, security/*.policy.xml); empty: the environment decides"),
    ]
    if device.urdf:
        arguments += [
            DeclareLaunchArgument("rsp", default_value="true", description="start robot_state_publisher (/tf at the publish rate)"),
            DeclareLaunchArgument("rviz", default_value="false", description="start rviz2"),
            DeclareLaunchArgument("rviz_config", default_value=os.path.join(SHARE, "rviz", device.rviz[0]),
                                  description="rviz2 configuration (its topics and frames follow the namespace)"),
        ]
    if device.controllers:
        arguments.append(DeclareLaunchArgument(
            "control", default_value="native", choices=["native", "ros2_control"],
            description="native: the node takes its own commands; ros2_control: controller_manager with "
                        f"config/{device.controllers} commands it through topic_based_ros2_control"))
    for name, (_, _, default, help_text) in device.lengths.items():
        arguments.append(DeclareLaunchArgument(name, default_value=str(default), description=f"{help_text} [m]"))
    return LaunchDescription(arguments + [OpaqueFunction(function=start, args=[executable, overrides, device])])


def bag_folder(context, device):
    """Where a recording goes: `bag:=DIR`, else a new folder named by the device and the start."""
    chosen = value(context, "bag")
    if chosen:
        return chosen
    ros_home = os.environ.get("ROS_HOME") or os.path.join(os.path.expanduser("~"), ".ros")
    start = datetime.datetime.now(datetime.timezone.utc).strftime("%Y_%m_%d-%H_%M_%S")
    return os.path.join(ros_home, "bags", f"{device.bag}_{start}")


def start(context, executable, overrides, device):
    """What to start, decided before anything starts."""
    namespace = value(context, "namespace").strip("/")
    prefix = f"{namespace}/" if namespace else ""
    ns = f"/{namespace}" if namespace else ""
    # Under a namespace the node's frames carry its prefix; otherwise its parameter file names them.
    frames = {parameter: prefix + frame for parameter, frame in device.frames.items()} if namespace else {}
    refusal = enclave_refusal(context)
    if refusal:
        return [LogInfo(msg=f"{refusal}: nothing started"), Shutdown(reason=refusal)]
    ros2_control = device.controllers and value(context, "control") == "ros2_control"
    if ros2_control:
        missing = [package for package in control.PACKAGES if not installed(package)]
        if missing:
            names = ", ".join(missing)
            return [LogInfo(msg=f"control:=ros2_control needs {names}, not installed here: nothing started"),
                    Shutdown(reason=f"{names} not installed")]
    remappings = control.node_remappings(executable, ns) if ros2_control else []
    fixed = {**frames, "ros2_control": True} if ros2_control else frames
    driver = node(context, executable, overrides, namespace, fixed, remappings)
    optional = {}
    if device.urdf:
        sim_time = {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)} \
            if given(context, "use_sim_time") is not None else {}
        robot_state_publisher = Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            namespace=namespace,
            output="screen",
            parameters=[{
                "robot_description": robot_description(context, device, f"{ns}/{executable}"),
                "publish_frequency": rsp_frequency(float(effective(context, device.rate) or 250.0)),
                "frame_prefix": prefix,
                **sim_time,
            }],
            **enclave(context, "robot_state_publisher"),
        )
        optional["rsp"] = ([robot_state_publisher], ["robot_state_publisher"], False)
        # Its configuration is a file written for this launch: only when rviz will start
        # (without rviz2, select() says it is not installed).
        rviz = []
        if switched_on(context, "rviz") and installed("rviz2"):
            rviz = [Node(
                package="rviz2",
                executable="rviz2",
                namespace=namespace,
                arguments=["-d", rviz_config(context, executable, device, ns, prefix)],
                parameters=[sim_time],
                **enclave(context, "viewer"),
            )]
        optional["rviz"] = (rviz, ["rviz2"], False)
    private = f"{ns}/{executable}/"
    topics = "|".join([f"{private}.*"] + [f"{ns}/{topic}" for topic in device.topics]
                      + ["/clock", "/tf", "/tf_static", "/diagnostics", "/rosout"])
    if switched_on(context, "record"):
        folder = bag_folder(context, device)
        # MCAP on every distro: Humble's rosbag2 would write SQLite by default.
        record = ExecuteProcess(
            cmd=["ros2", "bag", "record", "-s", "mcap", "-o", folder, "--regex", f"^({topics})$"],
            output="screen",
            **enclave(context, "recorder"),
        )
        optional["record"] = ([LogInfo(msg=f"recording to {folder}"), record], ["ros2bag", "rosbag2_storage_mcap"], True)
    actions = select(context, driver, optional)
    if ros2_control and actions[0] is driver:
        actions += control.controller_actions(SHARE, device.controllers, namespace, ns,
                                              robot_description(context, device, f"{ns}/{executable}"),
                                              enclave(context, "ros2_control"), enclave(context, "spawner"))
    return actions


def rsp_frequency(rate_hz):
    """robot_state_publisher's publish_frequency for joint states at `rate_hz`: it drops a
    message stamped less than 1/frequency (in whole milliseconds) after the last it published,
    so at the rate itself the stamps' jitter would lose a third of them; at twice the rate (its
    limit is 1000) every message becomes /tf."""
    return min(2.0 * rate_hz, 1000.0)


def root_link(context, device):
    """The link of the device's URDF that hangs from no joint: rviz's fixed frame."""
    robot = ET.fromstring(robot_description(context, device, ""))
    children = {joint.find("child").get("link") for joint in robot.findall("joint")}
    return next(link.get("name") for link in robot.iter("link") if link.get("name") not in children)


def robot_description(context, device, node):
    """The device's URDF, with the link lengths the launch arguments give and its ros2_control
    hardware's topics under `node` (/NS/EXECUTABLE)."""
    robot = ET.parse(os.path.join(SHARE, "urdf", device.urdf)).getroot()
    control.hardware_topics(robot, node)
    for argument, (link_name, joint_name, _, _) in device.lengths.items():
        length = float(value(context, argument))
        if not (math.isfinite(length) and length > 0.0):
            raise ValueError(f"{argument}:={value(context, argument)} is not a link length in metres (> 0)")
        link = robot.find(f"link[@name='{link_name}']")
        for shape in (*link.iter("visual"), *link.iter("collision")):
            shape.find("origin").set("xyz", f"{length / 2} 0 0")
            shape.find("geometry/cylinder").set("length", str(length))
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
    """Each switched-on set of actions whose packages are installed, beside `main`; a missing
    optional package is a one-line note, a missing required one ends the launch with its name
    and nothing started."""
    actions = [main]
    for switch, (started, packages, required) in optional.items():
        if not switched_on(context, switch):
            continue
        missing = [package for package in packages if not installed(package)]
        if not missing:
            actions.extend(started)
        elif required:
            names = " and ".join(missing)
            return [LogInfo(msg=f"{switch}:=true needs {names}, not installed here: nothing started"),
                    Shutdown(reason=f"{names} not installed")]
        else:
            actions.append(LogInfo(msg=f"{missing[0]} is not installed: not started ({switch}:=false silences this)"))
    return actions

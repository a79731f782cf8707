"""The SIL simulator with robot_state_publisher, and optionally rviz2 and a rosbag recording.

    ros2 launch arm_hil sil.launch.py rviz:=true
    ros2 launch arm_hil sil.launch.py record:=true bag:=/tmp/arm_hil_run rsp:=false

robot_state_publisher and rviz2 are optional: where one is not installed, the launch says so in
one line and starts the rest. A recording needs ros2bag: without it nothing is started.
"""

import os

from ament_index_python.packages import PackageNotFoundError, get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, ExecuteProcess, LogInfo, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

# Everything needed to replay a run: state, references, diagnostics, transforms, the model.
RECORDED_TOPICS = [
    "/joint_states",
    "/sil_node/end_effector",
    "/sil_node/end_effector_twist",
    "/sil_node/reference",
    "/sil_node/state",
    "/sil_node/reference_path",
    "/sil_node/ideal",
    "/diagnostics",
    "/tf",
    "/tf_static",
    "/robot_description",
]


def generate_launch_description():
    share = get_package_share_directory("arm_hil")
    with open(os.path.join(share, "urdf", "arm_hil.urdf"), encoding="utf-8") as urdf:
        robot_description = urdf.read()

    arguments = [
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2"),
        DeclareLaunchArgument("rsp", default_value="true", description="start robot_state_publisher (/tf for rviz)"),
        DeclareLaunchArgument("record", default_value="false", description="record the package's topics with ros2 bag"),
        DeclareLaunchArgument("bag", default_value="arm_hil_sil", description="output directory of the recording"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock (for ros2 bag play --clock)"),
        DeclareLaunchArgument("params_file", default_value=os.path.join(share, "config", "sil.yaml"), description="sil_node parameters"),
        DeclareLaunchArgument("trajectory_file", default_value="", description="trajectory CSV; empty = the built-in arc"),
        DeclareLaunchArgument("real_time_factor", default_value="1.0", description="simulated s per wall s; 0 = as fast as possible"),
        DeclareLaunchArgument("publish_rate_hz", default_value="250.0", description="publish rate [Hz]"),
        DeclareLaunchArgument("publish_clock", default_value="false", description="publish /clock from simulated time"),
        DeclareLaunchArgument("loop", default_value="true", description="repeat the trajectory"),
        DeclareLaunchArgument("rviz_config", default_value=os.path.join(share, "rviz", "arm_hil.rviz"), description="rviz2 configuration"),
    ]
    use_sim_time = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)

    sil_node = Node(
        package="arm_hil",
        executable="sil_node",
        name="sil_node",
        output="screen",
        parameters=[
            LaunchConfiguration("params_file"),
            {
                "use_sim_time": use_sim_time,
                "trajectory_file": ParameterValue(LaunchConfiguration("trajectory_file"), value_type=str),
                "real_time_factor": ParameterValue(LaunchConfiguration("real_time_factor"), value_type=float),
                "publish_rate_hz": ParameterValue(LaunchConfiguration("publish_rate_hz"), value_type=float),
                "publish_clock": ParameterValue(LaunchConfiguration("publish_clock"), value_type=bool),
                "loop": ParameterValue(LaunchConfiguration("loop"), value_type=bool),
            },
        ],
    )
    robot_state_publisher = Node(
        package="robot_state_publisher",
        executable="robot_state_publisher",
        output="screen",
        parameters=[{"robot_description": robot_description, "use_sim_time": use_sim_time}],
    )
    rviz = Node(
        package="rviz2",
        executable="rviz2",
        arguments=["-d", LaunchConfiguration("rviz_config")],
        parameters=[{"use_sim_time": use_sim_time}],
    )
    record = ExecuteProcess(
        cmd=["ros2", "bag", "record", "-o", LaunchConfiguration("bag")] + RECORDED_TOPICS,
        output="screen",
    )
    return LaunchDescription(arguments + [OpaqueFunction(function=select, args=[sil_node, {
        "rsp": (robot_state_publisher, "robot_state_publisher", False),
        "rviz": (rviz, "rviz2", False),
        "record": (record, "ros2bag", True),
    }])])


def installed(package):
    try:
        get_package_share_directory(package)
        return True
    except PackageNotFoundError:
        return False


def select(context, sil_node, optional):
    """What to start, decided before anything starts: each switched-on action whose package is
    installed; a missing optional package is a one-line note, a missing required one ends the
    launch with its name and nothing started."""
    actions = [sil_node]
    for switch, (action, package, required) in optional.items():
        if LaunchConfiguration(switch).perform(context).lower() not in ("true", "1", "yes"):
            continue
        if installed(package):
            actions.append(action)
        elif required:
            return [LogInfo(msg=f"{switch}:=true needs the package {package}, which is not installed: nothing started"),
                    Shutdown(reason=f"{package} is not installed")]
        else:
            actions.append(LogInfo(msg=f"{package} is not installed: not started ({switch}:=false silences this)"))
    return actions

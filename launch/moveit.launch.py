"""MoveIt on a device: the device's bringup and move_group with the package's MoveIt
configuration (moveit/), planning in joint space and executing through the device's
FollowJointTrajectory action.

    ros2 launch arm_hil moveit.launch.py                                   # the STM32 arm, its board found by USB id
    ros2 launch arm_hil moveit.launch.py device:=stm32 port:=/dev/ttyACM0
    ros2 launch arm_hil moveit.launch.py device:=stm32 control:=ros2_control   # through joint_trajectory_controller
    ros2 launch arm_hil moveit.launch.py device:=arduino port:=/dev/ttyUSB0    # the finger testbench
    ros2 launch arm_hil moveit.launch.py rviz:=true            # with rviz's MotionPlanning view

Every other argument goes to the device's bringup (stm32.launch.py, arduino.launch.py:
`--show-args` of those lists them); the link lengths, `namespace:=` and `use_sim_time:=` reach
move_group as well. move_group's planning group is `arm` (the STM32 arm) or `fingers` (the
testbench); its MoveGroup action is NS/move_action. Where MoveIt (or, with control:=ros2_control,
ros2_control) is not installed, the launch names the missing packages and starts nothing; so it
does with `enclave:=`, as move_group has no enclave.
"""

import functools
import importlib.util
import os
import re
import sys
import tempfile

import yaml
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction, Shutdown
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue

sys.path.insert(0, os.path.dirname(__file__))
import control  # noqa: E402
from nodes import NOT_GIVEN, SHARE, given, installed, robot_description, root_link, switched_on, value  # noqa: E402

MOVEIT = ["moveit_ros_move_group", "moveit_planners_ompl", "moveit_kinematics", "moveit_simple_controller_manager"]

# Per device: its bringup, SRDF, planning group, kinematics (None: joint goals only), joint
# limits and controllers; the node and its URDF come from the bringup itself.
DEVICES = {
    "stm32": ("stm32.launch.py", "stm32_arm.srdf", "arm", "stm32_kinematics.yaml", "stm32_joint_limits.yaml",
              "stm32_moveit_controllers.yaml"),
    "arduino": ("arduino.launch.py", "finger_testbench.srdf", "fingers", None, "finger_joint_limits.yaml",
                "finger_moveit_controllers.yaml"),
}


@functools.cache
def bringup_module(file):
    """A device's launch file beside this one, as a module: its EXECUTABLE and DEVICE (launch/nodes.py)."""
    spec = importlib.util.spec_from_file_location(file.replace(".", "_"), os.path.join(os.path.dirname(__file__), file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load(*path):
    with open(os.path.join(SHARE, *path)) as file:
        return file.read()


def controllers(file, driver, control_mode):
    """The controllers file, with joint_trajectory_controller in place of the driver's own
    action under ros2_control."""
    config = yaml.safe_load(load("moveit", file))
    if control_mode == "ros2_control":
        manager = config["moveit_simple_controller_manager"]
        manager["joint_trajectory_controller"] = manager.pop(driver)
        manager["controller_names"] = ["joint_trajectory_controller"]
    return config


def refusal(context):
    """Why nothing may start, or None; decided before the device's bringup starts anything."""
    missing = [package for package in MOVEIT if not installed(package)]
    if missing:
        return f"MoveIt is not installed here (missing: {', '.join(missing)})"
    if value(context, "enclave"):
        return "enclave:= is not supported with MoveIt: move_group has no enclave (docs/security.md)"
    if value(context, "control") == "ros2_control":
        missing = [package for package in control.PACKAGES if not installed(package)]
        if missing:
            return f"control:=ros2_control needs {', '.join(missing)}, not installed here"
    return None


def move_group(context):
    why = refusal(context)
    if why:
        return [LogInfo(msg=f"{why}: nothing started"), Shutdown(reason=why)]
    bringup, srdf, group, kinematics, limits, controller_file = DEVICES[value(context, "device")]
    device = bringup_module(bringup)
    namespace = value(context, "namespace").strip("/")
    ns = f"/{namespace}" if namespace else ""
    humble = os.environ.get("ROS_DISTRO") == "humble"
    ompl = yaml.safe_load(load("moveit", "ompl_planning_humble.yaml" if humble else "ompl_planning_jazzy.yaml"))
    parameters = {
        # The URDF the bringup gives robot_state_publisher: the link lengths given to this launch.
        "robot_description": robot_description(context, device.DEVICE, f"{ns}/{device.EXECUTABLE}"),
        "robot_description_semantic": load("moveit", srdf),
        "robot_description_planning": yaml.safe_load(load("moveit", limits)),
        "planning_pipelines": ["ompl"] if humble else {"pipeline_names": ["ompl"]},
        "default_planning_pipeline": "ompl",
        "ompl": ompl,
        "trajectory_execution": {
            "allowed_execution_duration_scaling": 1.2,
            "allowed_goal_duration_margin": 1.0,
            "allowed_start_tolerance": 0.02,
        },
        "publish_robot_description_semantic": True,
        **controllers(controller_file, device.EXECUTABLE, value(context, "control")),
    }
    if kinematics:
        parameters["robot_description_kinematics"] = yaml.safe_load(load("moveit", kinematics))
    if given(context, "use_sim_time") is not None:
        parameters["use_sim_time"] = ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)
    # rviz:=true is MoveIt's view here, not the bringup's.
    device_launch = IncludeLaunchDescription(PythonLaunchDescriptionSource(os.path.join(SHARE, "launch", bringup)),
                                             launch_arguments=[("rviz", "false")])
    # In the device's namespace, move_group finds its joint_states and its controller's action
    # there, and serves NS/move_action.
    actions = [device_launch, Node(package="moveit_ros_move_group", executable="move_group", namespace=namespace,
                                   output="screen", parameters=[parameters])]
    if switched_on(context, "rviz"):
        actions.append(motion_planning_view(context, device.DEVICE, group, namespace, parameters))
    return actions


def motion_planning_view(context, device, group, namespace, parameters):
    """rviz2 with the MotionPlanning display (rviz/moveit.rviz) on `group`, or a line saying why
    not. Its plugin reads the robot as move_group does, from its own parameters."""
    if not (installed("rviz2") and installed("moveit_ros_visualization")):
        return LogInfo(msg="rviz2 with moveit_ros_visualization is not installed: no MotionPlanning view "
                           "(rviz:=false silences this)")
    text = load("rviz", "moveit.rviz")
    text = text.replace("Planning Group: arm", f"Planning Group: {group}")
    # Absolute: the panel puts it before move_group's names, and rviz runs in the namespace too.
    text = text.replace('Move Group Namespace: ""', f'Move Group Namespace: "/{namespace}"' if namespace else
                        'Move Group Namespace: ""')
    # MoveIt's robot state has the URDF's own frames, without the namespace's prefix (under a
    # namespace rviz says no /tf carries that frame, and draws MoveIt's robot all the same).
    text = re.sub(r"Fixed Frame: .*", f"Fixed Frame: {root_link(context, device)}", text)
    handle, path = tempfile.mkstemp(prefix="arm_hil_moveit_", suffix=".rviz")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    robot = {key: parameters[key] for key in ("robot_description", "robot_description_semantic",
                                              "robot_description_kinematics", "robot_description_planning",
                                              "use_sim_time")
             if key in parameters}
    return Node(package="rviz2", executable="rviz2", namespace=namespace, output="screen",
                arguments=["-d", path], parameters=[robot])


def generate_launch_description():
    # The bringups' arguments that move_group reads as well, declared here so that they hold
    # before the bringup is included; the bringup declares the rest (`--show-args` of it).
    lengths = [DeclareLaunchArgument(name, default_value=str(default), description=f"{device}: {text} [m]")
               for device, (file, *_) in DEVICES.items()
               for name, (_, _, default, text) in bringup_module(file).DEVICE.lengths.items()]
    return LaunchDescription([
        DeclareLaunchArgument("device", default_value="stm32", choices=list(DEVICES), description="stm32 or arduino"),
        DeclareLaunchArgument("control", default_value="native", choices=["native", "ros2_control"],
                              description="native (the driver's own action) or ros2_control"),
        DeclareLaunchArgument("namespace", default_value="", description="the device's namespace, move_group's too"),
        DeclareLaunchArgument("use_sim_time", default_value=NOT_GIVEN, description="follow /clock (move_group too)"),
        DeclareLaunchArgument("enclave", default_value="", description="not supported with MoveIt (move_group has no enclave)"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with MoveIt's MotionPlanning view"),
        *lengths,
        OpaqueFunction(function=move_group),
    ])

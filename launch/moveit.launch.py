"""MoveIt on a device: the device's bringup and move_group with the package's MoveIt
configuration (moveit/), planning in joint space and executing through the device's
FollowJointTrajectory action.

    ros2 launch arm_hil moveit.launch.py                                   # the STM32 arm, its board found by USB id
    ros2 launch arm_hil moveit.launch.py device:=stm32 port:=/dev/ttyACM0
    ros2 launch arm_hil moveit.launch.py device:=stm32 control:=ros2_control   # through joint_trajectory_controller
    ros2 launch arm_hil moveit.launch.py device:=arduino port:=/dev/ttyUSB0    # the finger testbench

Every other argument goes to the device's bringup (stm32.launch.py, arduino.launch.py:
`--show-args` of those lists them). move_group's planning group is `arm` (the STM32 arm) or
`fingers` (the testbench); its MoveGroup action is /move_action. Where MoveIt is not installed,
the launch names the missing packages and starts nothing.
"""

import os

import yaml
from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, LogInfo, OpaqueFunction, Shutdown
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

MOVEIT = ["moveit_ros_move_group", "moveit_planners_ompl", "moveit_kinematics", "moveit_simple_controller_manager"]

# Per device: its bringup, URDF, SRDF, kinematics (None: joint goals only), joint limits,
# controllers, and its driver's name (the native action's controller).
DEVICES = {
    "stm32": ("stm32.launch.py", "stm32_arm.urdf", "stm32_arm.srdf", "stm32_kinematics.yaml",
              "stm32_joint_limits.yaml", "stm32_moveit_controllers.yaml", "stm32_driver"),
    "arduino": ("arduino.launch.py", "finger_testbench.urdf", "finger_testbench.srdf", None,
                "finger_joint_limits.yaml", "finger_moveit_controllers.yaml", "arduino_driver"),
}


def missing_packages():
    missing = []
    for package in MOVEIT:
        try:
            get_package_share_directory(package)
        except Exception:  # noqa: BLE001 (ament raises its own PackageNotFoundError)
            missing.append(package)
    return missing


def load(share, *path):
    with open(os.path.join(share, *path)) as file:
        return file.read()


def controllers(share, file, driver, control):
    """The controllers file, with joint_trajectory_controller in place of the driver's own
    action under ros2_control."""
    config = yaml.safe_load(load(share, "moveit", file))
    if control == "ros2_control":
        manager = config["moveit_simple_controller_manager"]
        manager["joint_trajectory_controller"] = manager.pop(driver)
        manager["controller_names"] = ["joint_trajectory_controller"]
    return config


def move_group(context):
    device = LaunchConfiguration("device").perform(context)
    missing = missing_packages()
    if missing:
        return [LogInfo(msg=f"MoveIt is not installed here (missing: {', '.join(missing)}): nothing started"),
                Shutdown(reason="MoveIt is not installed")]
    bringup, urdf, srdf, kinematics, limits, controller_file, driver = DEVICES[device]
    share = get_package_share_directory("arm_hil")
    control = LaunchConfiguration("control").perform(context)
    humble = os.environ.get("ROS_DISTRO") == "humble"
    ompl = yaml.safe_load(load(share, "moveit", "ompl_planning_humble.yaml" if humble else "ompl_planning_jazzy.yaml"))
    parameters = {
        "robot_description": load(share, "urdf", urdf),
        "robot_description_semantic": load(share, "moveit", srdf),
        "robot_description_planning": yaml.safe_load(load(share, "moveit", limits)),
        "planning_pipelines": ["ompl"] if humble else {"pipeline_names": ["ompl"]},
        "default_planning_pipeline": "ompl",
        "ompl": ompl,
        "trajectory_execution": {
            "allowed_execution_duration_scaling": 1.2,
            "allowed_goal_duration_margin": 1.0,
            "allowed_start_tolerance": 0.02,
        },
        "publish_robot_description_semantic": True,
        **controllers(share, controller_file, driver, control),
    }
    if kinematics:
        parameters["robot_description_kinematics"] = yaml.safe_load(load(share, "moveit", kinematics))
    device_launch = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", bringup)))
    return [device_launch,
            Node(package="moveit_ros_move_group", executable="move_group", output="screen", parameters=[parameters])]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("device", default_value="stm32", choices=list(DEVICES), description="stm32 or arduino"),
        DeclareLaunchArgument("control", default_value="native", choices=["native", "ros2_control"],
                              description="native (the driver's own action) or ros2_control"),
        OpaqueFunction(function=move_group),
    ])

"""Shared by the launch files: one node with its parameter file, where launch arguments that
override single parameters come last."""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def node_launch(executable, overrides):
    """A launch description for `executable`: `params_file` (config/EXECUTABLE.yaml by default),
    `use_sim_time`, and one launch argument per entry of `overrides` (name: (default, type, help))."""
    share = get_package_share_directory("arm_hil")
    default_params = os.path.join(share, "config", executable + ".yaml")
    arguments = [
        DeclareLaunchArgument("params_file", default_value=default_params, description=f"{executable} parameters"),
        DeclareLaunchArgument("use_sim_time", default_value="false", description="follow /clock"),
    ]
    parameters = {"use_sim_time": ParameterValue(LaunchConfiguration("use_sim_time"), value_type=bool)}
    for name, (default, kind, help_text) in overrides.items():
        argument = name.replace(".", "_")
        arguments.append(DeclareLaunchArgument(argument, default_value=default, description=help_text))
        parameters[name] = ParameterValue(LaunchConfiguration(argument), value_type=kind)
    node = Node(
        package="arm_hil",
        executable=executable,
        name=executable,
        output="screen",
        parameters=[LaunchConfiguration("params_file"), parameters],
    )
    return LaunchDescription(arguments + [node])

"""The `control:=ros2_control` bringup of a device (launch/nodes.py): ros2_control's controller
manager with the device's controllers file (config/), the spawners of joint_state_broadcaster and
joint_trajectory_controller (active) and forward_position_controller (inactive, to switch to),
and the node wired to topic_based_ros2_control, the hardware plugin its URDF names: the node's
joint states go to `~/hardware/joint_states`, where the plugin reads them, and the plugin's
commands come to the node's `~/joint_command`; /joint_states is the broadcaster's."""

import os

from launch_ros.actions import Node

# What `control:=ros2_control` starts; the launch names the missing ones and starts nothing.
PACKAGES = ["controller_manager", "joint_state_broadcaster", "joint_trajectory_controller", "position_controllers",
            "topic_based_ros2_control"]
ACTIVE = ["joint_state_broadcaster", "joint_trajectory_controller"]
INACTIVE = ["forward_position_controller"]


def hardware_topics(robot, node):
    """The plugin's topics in the URDF `robot` (an ElementTree root), relative to the node there,
    as the full names under `node` (/NS/EXECUTABLE)."""
    for parameter in robot.iterfind("ros2_control/hardware/param"):
        if parameter.get("name") in ("joint_commands_topic", "joint_states_topic"):
            parameter.text = f"{node}/{parameter.text}"


def node_remappings(executable, ns):
    """The node's remappings under ros2_control: its joint states go where the plugin reads them."""
    return [("joint_states", f"{ns}/{executable}/hardware/joint_states")]


def controller_actions(share, controllers, namespace, ns, description, manager_enclave, spawner_enclave):
    """The controller manager with `controllers` (in config/) and the spawners, each started in
    its enclave (launch/nodes.py)."""
    manager = f"{ns}/controller_manager"
    parameters = [os.path.join(share, "config", controllers)]
    # Humble's controller manager reads the URDF from its parameter; Jazzy's from the topic.
    if os.environ.get("ROS_DISTRO") == "humble":
        parameters.insert(0, {"robot_description": description})
    control_node = Node(
        package="controller_manager",
        executable="ros2_control_node",
        namespace=namespace,
        output="screen",
        parameters=parameters,
        remappings=[("~/robot_description", f"{ns}/robot_description")],
        **manager_enclave,
    )
    spawners = [
        Node(package="controller_manager", executable="spawner", namespace=namespace, output="screen",
             arguments=[*ACTIVE, "--controller-manager", manager], **spawner_enclave),
        Node(package="controller_manager", executable="spawner", namespace=namespace, output="screen",
             arguments=[*INACTIVE, "--inactive", "--controller-manager", manager], **spawner_enclave),
    ]
    return [control_node, *spawners]

"""MoveIt on the package's devices (docs/ros-tools.md#moveit): move_group, started by
launch/moveit.launch.py with the package's configuration (moveit/), plans through /move_action
and executes through each device's FollowJointTrajectory action, against the device emulators.
Skipped where MoveIt is not built (tools/ros_underlay.sh with MOVEIT=1).

Part of the suite that tests/ros/test_nodes.py runs (its helpers and process handling)."""

import time
import unittest
import xml.etree.ElementTree as ET

import rclpy
from rcl_interfaces.srv import GetParameters
from rclpy.action import ActionClient

from test_follow_joint_trajectory import FollowJointTrajectoryTest, installed
from test_nodes import SHARE

try:
    from moveit_msgs.action import MoveGroup
    from moveit_msgs.msg import Constraints, JointConstraint, MoveItErrorCodes
except ImportError:  # MoveIt's interfaces are not built here
    MoveGroup = None

MOVEIT = MoveGroup is not None and installed("moveit_ros_move_group") and installed("moveit_planners_ompl")
ROS2_CONTROL = installed("controller_manager") and installed("topic_based_ros2_control")
STM32_JOINTS = ("stm32_shoulder", "stm32_elbow")
FINGER_JOINTS = ("finger_joint0", "finger_joint1", "finger_joint2", "finger_joint3")


def named_pose(srdf, name):
    """The joint values of the SRDF's group state `name`, as MoveIt's named targets are."""
    root = ET.parse(SHARE / "moveit" / srdf).getroot()
    state = next(s for s in root.iter("group_state") if s.get("name") == name)
    return {joint.get("name"): float(joint.get("value")) for joint in state.iter("joint")}


def joint_goal(group, target, plan_only=False):
    """MoveGroup's goal: `group` to the joint values `target` ({joint: rad}), within 0.01 rad."""
    goal = MoveGroup.Goal()
    goal.request.group_name = group
    goal.request.num_planning_attempts = 1
    goal.request.allowed_planning_time = 5.0
    goal.request.goal_constraints = [Constraints(joint_constraints=[
        JointConstraint(joint_name=joint, position=value, tolerance_above=0.01, tolerance_below=0.01, weight=1.0)
        for joint, value in target.items()])]
    goal.request.start_state.is_diff = True  # from the current state, as MoveGroupInterface asks
    goal.planning_options.plan_only = plan_only
    return goal


def move(node, goal, timeout=60.0):
    """Sends `goal` to /move_action from `node`: MoveGroup's result (None if none came) and how
    long it took [s]."""
    client = ActionClient(node, MoveGroup, "/move_action")
    try:
        if not client.wait_for_server(timeout_sec=60.0):
            return None, 0.0
        started = time.monotonic()
        sent = client.send_goal_async(goal)
        rclpy.spin_until_future_complete(node, sent, timeout_sec=30.0)
        if not (sent.done() and sent.result().accepted):
            return None, 0.0
        result = sent.result().get_result_async()
        rclpy.spin_until_future_complete(node, result, timeout_sec=timeout)
        return (result.result().result if result.done() else None), time.monotonic() - started
    finally:
        client.destroy()


@unittest.skipUnless(MOVEIT, "MoveIt is not built here (tools/ros_underlay.sh with MOVEIT=1)")
class MoveItPlansAndExecutes(FollowJointTrajectoryTest):
    """A MoveGroup client, as rviz's MotionPlanning panel or MoveGroupInterface is."""

    def move(self, group, target, plan_only=False):
        """Plans (and executes, unless `plan_only`) `group` to the joint values `target`
        ({joint: rad}); MoveGroup's result and how long the request took [s]."""
        result, took = move(self.node, joint_goal(group, target, plan_only))
        self.assertIsNotNone(result, "move_group took no request, or gave no result within 60 s")
        return result, took

    def check_plans_and_moves(self, group, srdf, target, named, outside, limit):
        """A plan-only request moves nothing; a joint goal and a named pose are planned and
        executed, the device's joints there within 0.03 rad; a goal past a joint's limit is
        planned to the limit, not past it (MoveIt takes the bound for it)."""
        here = self.positions()
        planned, _ = self.move(group, dict(zip(self.joints, target)), plan_only=True)
        self.assertEqual(planned.error_code.val, MoveItErrorCodes.SUCCESS)
        self.assertGreater(len(planned.planned_trajectory.joint_trajectory.points), 1)
        self.assertTrue(all(abs(a - b) < 0.02 for a, b in zip(self.positions(), here)), "a plan-only request moved it")

        for goal in (dict(zip(self.joints, target)), named_pose(srdf, named)):
            done, _ = self.move(group, goal)
            self.assertEqual(done.error_code.val, MoveItErrorCodes.SUCCESS, f"to {goal}")
            reached = self.positions()
            self.assertTrue(all(abs(reached[i] - goal[joint]) < 0.03 for i, joint in enumerate(self.joints)),
                            f"{goal} planned and executed, the device is at {reached}")

        past, _ = self.move(group, dict(zip(self.joints, outside)), plan_only=True)
        if past.error_code.val == MoveItErrorCodes.SUCCESS:
            end = past.planned_trajectory.joint_trajectory.points[-1].positions
            self.assertTrue(all(abs(p) <= limit + 1e-6 for p in end), f"planned past the limit: {list(end)}")
        self.assert_still(1.0, tolerance=0.02)

    def test_a_joint_goal_is_planned_and_executed_on_the_stm32_arm(self):
        self.node_name, self.joints = "stm32_driver", STM32_JOINTS
        self.start_driver("stm32", "moveit.launch.py", "stm32_driver: link", "device:=stm32", "upper_arm_length:=0.2")
        # move_group plans with the link lengths given to the launch, and the links' collision shapes.
        got = self.call(GetParameters, "/move_group/get_parameters", GetParameters.Request(names=["robot_description"]))
        robot = ET.fromstring(got.values[0].string_value)
        self.assertEqual(robot.find("joint[@name='stm32_elbow']/origin").get("xyz"), "0.2 0 0")
        self.assertEqual(robot.find("link[@name='stm32_upper_arm']/collision/geometry/cylinder").get("length"), "0.2")
        self.check_plans_and_moves("arm", "stm32_arm.srdf", [0.5, -0.4], "raised", [2.0, 0.0], limit=1.5707963)

    @unittest.skipUnless(ROS2_CONTROL, "ros2_control is not built here (tools/ros_underlay.sh with ROS2_CONTROL=1)")
    def test_a_joint_goal_is_executed_through_joint_trajectory_controller(self):
        self.node_name, self.joints = "stm32_driver", STM32_JOINTS
        self.start_driver("stm32", "moveit.launch.py", "stm32_driver: link", "device:=stm32", "control:=ros2_control")
        self.wait_controllers({"joint_trajectory_controller": "active"})
        done, _ = self.move("arm", dict(zip(self.joints, [-0.6, 0.5])))
        self.assertEqual(done.error_code.val, MoveItErrorCodes.SUCCESS)
        reached = self.positions()
        self.assertTrue(all(abs(a - b) < 0.03 for a, b in zip(reached, [-0.6, 0.5])), f"at {reached}")
        # JTC took the trajectory, not the driver's own action (which still serves).
        said = self.launched.log_path.read_text()
        self.assertIn("Accepted new action goal", said, "joint_trajectory_controller took no goal")
        self.assertNotIn("~/follow_joint_trajectory: goal", said, "the driver's own action took the goal")

    def test_a_joint_goal_is_planned_and_executed_on_the_finger_testbench(self):
        self.node_name, self.joints = "arduino_driver", FINGER_JOINTS
        self.start_driver("rdscom", "moveit.launch.py", "arduino_driver: link", "device:=arduino")
        done, _ = self.move("fingers", dict(zip(self.joints, [0.1, 0.6, 0.5, 0.4])))
        self.assertEqual(done.error_code.val, MoveItErrorCodes.SUCCESS)
        reached = self.positions()
        self.assertTrue(all(abs(a - b) < 0.05 for a, b in zip(reached, [0.1, 0.6, 0.5, 0.4])), f"at {reached}")

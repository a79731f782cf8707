//! The `legacy_bridge` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::legacy::NODE, arm_hil::ros::legacy_bridge::main)
}

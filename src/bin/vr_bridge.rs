//! The `vr_bridge` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::vr::NODE, arm_hil::ros::vr_bridge::main)
}

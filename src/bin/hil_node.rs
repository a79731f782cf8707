//! The `hil_node` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::hil::NODE, arm_hil::ros::hil_node::main)
}

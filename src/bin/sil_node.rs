//! The `sil_node` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::sil::NODE, arm_hil::ros::sil_node::main)
}

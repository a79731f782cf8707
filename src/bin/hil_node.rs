//! The `hil_node` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run("hil_node", arm_hil::ros::hil_node::main)
}

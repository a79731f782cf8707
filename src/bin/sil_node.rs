//! The `sil_node` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run("sil_node", arm_hil::ros::sil_node::main)
}

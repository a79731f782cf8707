//! The `sil_node` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::sil_node::main()
}

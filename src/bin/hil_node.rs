//! The `hil_node` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::hil_node::main()
}

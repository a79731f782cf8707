//! The `vr_bridge` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::vr_bridge::main()
}

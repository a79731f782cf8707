//! The `legacy_bridge` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::legacy_bridge::main()
}

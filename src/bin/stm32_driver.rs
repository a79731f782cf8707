//! The `stm32_driver` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::stm32_driver::main()
}

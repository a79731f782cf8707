//! The `arduino_driver` ROS 2 executable (feature `ros`).

fn main() -> anyhow::Result<()> {
    arm_hil::ros::arduino_driver::main()
}

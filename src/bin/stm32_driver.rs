//! The `stm32_driver` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::stm32::NODE, arm_hil::ros::stm32_driver::main)
}

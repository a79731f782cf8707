//! The `stm32_driver` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run("stm32_driver", arm_hil::ros::stm32_driver::main)
}

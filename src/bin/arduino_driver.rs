//! The `arduino_driver` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run(arm_hil::nodes::arduino::NODE, arm_hil::ros::arduino_driver::main)
}

//! The `arduino_driver` ROS 2 executable (feature `ros`).

fn main() -> std::process::ExitCode {
    arm_hil::ros::run("arduino_driver", arm_hil::ros::arduino_driver::main)
}

//! What the ROS nodes do, without ROS: parameters into configuration, messages into library
//! types, joint states for the URDF, and the nodes' run loops producing plain data. The `ros`
//! module (feature `ros`) only moves this data in and out of r2r.

pub mod joints;
pub mod messages;
pub mod params;
pub mod sil;

//! The DDS Security (SROS2) settings a node starts with, checked before rcl starts: with
//! `ROS_SECURITY_ENABLE=true` a node's participant needs the keystore, its enclave's folder in
//! it and the six files there; rcl's own error names none of them ("rcl_init failed", or a
//! failure to create the node). Under `ROS_SECURITY_STRATEGY=Enforce` what is missing stops the
//! node; under Permissive rcl runs it unsecured, and the node warns.

use std::path::PathBuf;

/// What an enclave's folder holds: the identity (certificate and key, each a PEM file or a
/// PKCS#11 URI file, and the CA that signed it) and the signed governance and permissions.
pub const ENCLAVE_FILES: [&[&str]; 6] = [
    &["cert.pem", "cert.p11"],
    &["key.pem", "key.p11"],
    &["identity_ca.cert.pem"],
    &["permissions_ca.cert.pem"],
    &["governance.p7s"],
    &["permissions.p7s"],
];

/// What rcl does when a secured participant cannot be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The node runs unsecured.
    Permissive,
    /// The node does not start.
    Enforce,
}

/// A node's security settings, as rcl reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecuritySettings {
    pub keystore: Option<PathBuf>,
    /// The enclave's path, `/` unless `--enclave` or `ROS_SECURITY_ENCLAVE_OVERRIDE` names one.
    pub enclave: String,
    /// What named the enclave: `ROS_SECURITY_ENCLAVE_OVERRIDE`, `--enclave`, or nothing (`/`).
    pub enclave_from: &'static str,
    pub strategy: Strategy,
}

impl SecuritySettings {
    /// The settings from the environment (`variable` reads one) and the process's `arguments`
    /// (`--enclave` / `-e` after `--ros-args`); None when security is off.
    pub fn from_environment(variable: impl Fn(&str) -> Option<String>, arguments: &[String]) -> Option<Self> {
        if variable("ROS_SECURITY_ENABLE").as_deref() != Some("true") {
            return None;
        }
        let strategy = match variable("ROS_SECURITY_STRATEGY").as_deref() {
            Some("Enforce") => Strategy::Enforce,
            _ => Strategy::Permissive,
        };
        let (enclave, enclave_from) = match variable("ROS_SECURITY_ENCLAVE_OVERRIDE").filter(|name| !name.is_empty()) {
            Some(enclave) => (enclave, "ROS_SECURITY_ENCLAVE_OVERRIDE"),
            None => match enclave_argument(arguments) {
                Some(enclave) => (enclave, "--ros-args --enclave"),
                None => ("/".to_owned(), "no --enclave given"),
            },
        };
        let keystore = variable("ROS_SECURITY_KEYSTORE").filter(|path| !path.is_empty()).map(PathBuf::from);
        Some(SecuritySettings { keystore, enclave, enclave_from, strategy })
    }

    /// Why the node's secured participant cannot be set up: the variable, folder or files that
    /// are missing; None when everything rcl needs is there.
    pub fn missing(&self) -> Option<String> {
        let Some(keystore) = &self.keystore else {
            return Some("ROS_SECURITY_ENABLE=true but ROS_SECURITY_KEYSTORE is not set (the keystore's folder, made by `ros2 security create_keystore`)".to_owned());
        };
        if !self.enclave.starts_with('/') {
            return Some(format!(
                "enclave {} ({}) is not an enclave path: it starts with /",
                self.enclave, self.enclave_from
            ));
        }
        // rcl takes the folder under enclaves/ as the enclave's name without its first character.
        let folder = keystore.join("enclaves").join(&self.enclave[1..]);
        if !folder.is_dir() {
            return Some(format!(
                "enclave {} ({}) has no folder {} in the keystore {} (create it with `ros2 security generate_artifacts`, or name another)",
                self.enclave,
                self.enclave_from,
                folder.display(),
                keystore.display()
            ));
        }
        let absent: Vec<&str> = ENCLAVE_FILES
            .into_iter()
            .filter(|names| !names.iter().any(|name| folder.join(name).is_file()))
            .map(|names| names[0])
            .collect();
        match absent.is_empty() {
            true => None,
            false => Some(format!("enclave {} lacks {} in {}", self.enclave, absent.join(", "), folder.display())),
        }
    }
}

/// The enclave `arguments` give as rcl reads them: in each `--ros-args` block (up to `--`),
/// `--enclave NAME` or `-e NAME`, the last one given.
fn enclave_argument(arguments: &[String]) -> Option<String> {
    let mut enclave = None;
    let mut in_ros_arguments = false;
    let mut arguments = arguments.iter();
    while let Some(argument) = arguments.next() {
        match argument.as_str() {
            "--ros-args" => in_ros_arguments = true,
            "--" => in_ros_arguments = false,
            "--enclave" | "-e" if in_ros_arguments => enclave = arguments.next().cloned().or(enclave),
            _ => {}
        }
    }
    enclave
}

//! The DDS Security (SROS2) settings a node starts with, checked before rcl starts: with
//! `ROS_SECURITY_ENABLE=true` a node's participant needs the keystore, its enclave's folder in
//! it and the six files there; rcl's own error names none of them ("rcl_init failed", or a
//! failure to create the node). Under `ROS_SECURITY_STRATEGY=Enforce` what is missing stops the
//! node; under Permissive rcl runs it unsecured, and the node warns.

use std::path::PathBuf;

/// What an enclave's folder holds: the identity (certificate, key, the CA that signed it) and
/// the signed governance and permissions.
pub const ENCLAVE_FILES: [&str; 6] =
    ["cert.pem", "key.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem", "governance.p7s", "permissions.p7s"];

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
        let enclave = variable("ROS_SECURITY_ENCLAVE_OVERRIDE")
            .filter(|enclave| !enclave.is_empty())
            .or_else(|| enclave_argument(arguments))
            .unwrap_or_else(|| "/".to_owned());
        let keystore = variable("ROS_SECURITY_KEYSTORE").filter(|path| !path.is_empty()).map(PathBuf::from);
        Some(SecuritySettings { keystore, enclave, strategy })
    }

    /// Why the node's secured participant cannot be set up: the variable, folder or files that
    /// are missing; None when everything rcl needs is there.
    pub fn missing(&self) -> Option<String> {
        let Some(keystore) = &self.keystore else {
            return Some("ROS_SECURITY_ENABLE=true but ROS_SECURITY_KEYSTORE is not set (the keystore's folder, made by `ros2 security create_keystore`)".to_owned());
        };
        let folder = keystore.join("enclaves").join(self.enclave.trim_start_matches('/'));
        if !folder.is_dir() {
            return Some(format!(
                "enclave {} has no folder {} in the keystore {} (give the node its enclave with --ros-args --enclave, or the launch enclave:=; create it with `ros2 security generate_artifacts`)",
                self.enclave,
                folder.display(),
                keystore.display()
            ));
        }
        let absent: Vec<&str> = ENCLAVE_FILES.into_iter().filter(|file| !folder.join(file).is_file()).collect();
        match absent.is_empty() {
            true => None,
            false => Some(format!("enclave {} lacks {} in {}", self.enclave, absent.join(", "), folder.display())),
        }
    }
}

/// The enclave `arguments` give after `--ros-args`.
fn enclave_argument(arguments: &[String]) -> Option<String> {
    let ros = arguments.iter().skip_while(|argument| *argument != "--ros-args");
    let mut previous: Option<&String> = None;
    for argument in ros {
        if let Some(flag) = previous {
            if flag == "--enclave" || flag == "-e" {
                return Some(argument.clone());
            }
        }
        if let Some(enclave) = argument.strip_prefix("--enclave=") {
            return Some(enclave.to_owned());
        }
        previous = Some(argument);
    }
    None
}

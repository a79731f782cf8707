//! A node started under DDS Security says which variable, folder or file its secured
//! participant lacks, before rcl fails on it with a reason that names none of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arm_hil::nodes::security::{SecuritySettings, Strategy, ENCLAVE_FILES};

fn settings(variables: &[(&str, &str)], arguments: &[&str]) -> Option<SecuritySettings> {
    let variables: HashMap<String, String> =
        variables.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
    let arguments: Vec<String> = arguments.iter().map(|argument| argument.to_string()).collect();
    SecuritySettings::from_environment(|name| variables.get(name).cloned(), &arguments)
}

/// A keystore with the enclave /arm_hil/hil_node, holding `files`.
fn keystore(name: &str, files: &[&str]) -> PathBuf {
    let root = std::env::temp_dir().join(format!("arm_hil_sros2_{name}_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let enclave = root.join("enclaves/arm_hil/hil_node");
    std::fs::create_dir_all(&enclave).unwrap();
    for file in files {
        std::fs::write(enclave.join(file), b"").unwrap();
    }
    root
}

/// What a node started with `arguments`, security on and the keystore at `root`, lacks.
fn missing(root: &Path, arguments: &[&str]) -> Option<String> {
    let on = [("ROS_SECURITY_ENABLE", "true"), ("ROS_SECURITY_KEYSTORE", root.to_str().unwrap())];
    settings(&on, arguments).unwrap().missing()
}

const NODE: [&str; 4] = ["hil_node", "--ros-args", "--enclave", "/arm_hil/hil_node"];

#[test]
fn security_off_asks_nothing() {
    assert_eq!(settings(&[], &NODE), None);
    assert_eq!(settings(&[("ROS_SECURITY_ENABLE", "false")], &NODE), None);
}

#[test]
fn the_enclave_comes_from_the_override_then_the_arguments_then_the_root() {
    let on = ("ROS_SECURITY_ENABLE", "true");
    assert_eq!(settings(&[on], &NODE).unwrap().enclave, "/arm_hil/hil_node");
    assert_eq!(settings(&[on], &["hil_node", "--ros-args", "-e", "/a"]).unwrap().enclave, "/a");
    let last = ["hil_node", "--ros-args", "-e", "/a", "--", "--ros-args", "--enclave", "/b"];
    assert_eq!(settings(&[on], &last).unwrap().enclave, "/b", "rcl takes the last one given");
    assert_eq!(settings(&[on], &["hil_node", "--ros-args", "--enclave=/b"]).unwrap().enclave, "/", "not rcl's form");
    assert_eq!(settings(&[on], &["hil_node", "--enclave", "/not_a_ros_argument"]).unwrap().enclave, "/");
    let after = ["hil_node", "--ros-args", "--", "--enclave", "/after_the_block"];
    assert_eq!(settings(&[on], &after).unwrap().enclave, "/");
    let overridden = settings(&[on, ("ROS_SECURITY_ENCLAVE_OVERRIDE", "/arm_hil/viewer")], &NODE).unwrap();
    assert_eq!(
        (overridden.enclave.as_str(), overridden.enclave_from),
        ("/arm_hil/viewer", "ROS_SECURITY_ENCLAVE_OVERRIDE")
    );
    assert_eq!(overridden.strategy, Strategy::Permissive, "rcl's default strategy");
}

#[test]
fn a_missing_keystore_variable_is_named() {
    let on = settings(&[("ROS_SECURITY_ENABLE", "true"), ("ROS_SECURITY_STRATEGY", "Enforce")], &NODE).unwrap();
    assert_eq!(on.strategy, Strategy::Enforce);
    assert!(on.missing().unwrap().contains("ROS_SECURITY_KEYSTORE is not set"));
}

#[test]
fn an_enclave_without_its_folder_is_named_with_the_folder() {
    let all: Vec<&str> = ENCLAVE_FILES.iter().map(|names| names[0]).collect();
    let root = keystore("no_folder", &all);
    let missing = missing(&root, &["sil_node", "--ros-args", "--enclave", "/arm_hil/sil_node"]).unwrap();
    assert!(missing.contains("enclave /arm_hil/sil_node (--ros-args --enclave) has no folder"), "{missing}");
    assert!(missing.contains("enclaves/arm_hil/sil_node"), "{missing}");
    let unnamed = self::missing(&root, &["sil_node"]).unwrap();
    assert!(
        unnamed.contains("enclave / lacks cert.pem"),
        "no enclave named: the keystore's enclaves folder; {unnamed}"
    );
    assert_eq!(self::missing(&root, &NODE), None, "everything rcl needs is there");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn an_enclave_that_is_not_a_path_is_named() {
    let root = keystore("not_a_path", &[]);
    let missing = missing(&root, &["hil_node", "--ros-args", "--enclave", "arm_hil/hil_node"]).unwrap();
    assert!(missing.contains("is not an enclave path"), "{missing}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn an_identity_on_a_hardware_token_counts() {
    let root = keystore("pkcs11", &["cert.p11", "key.p11", "identity_ca.cert.pem", "permissions_ca.cert.pem"]);
    let missing = missing(&root, &NODE).unwrap();
    assert!(
        missing.ends_with(&format!(
            "lacks governance.p7s, permissions.p7s in {}",
            root.join("enclaves/arm_hil/hil_node").display()
        )),
        "{missing}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn an_enclave_lacking_files_names_each() {
    let root = keystore("lacking", &["cert.pem", "key.pem", "identity_ca.cert.pem", "permissions_ca.cert.pem"]);
    let missing = missing(&root, &NODE).unwrap();
    assert!(missing.contains("lacks governance.p7s, permissions.p7s"), "{missing}");
    let _ = std::fs::remove_dir_all(root);
}

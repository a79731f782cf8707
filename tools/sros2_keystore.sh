#!/usr/bin/env bash
# Creates (or adds to) an SROS2 keystore with the enclaves of this package's policies
# (security/*.policy.xml, or the POLICY files given): certificates and signed permissions for
# each enclave, under KEYSTORE/enclaves. Needs `ros2 security` (sros2) on PATH, i.e. a sourced
# ROS 2. Keys are made here, dated from now: never commit a keystore. docs/security.md.
#   tools/sros2_keystore.sh ~/arm_hil_keystore
#   tools/sros2_keystore.sh ~/arm_hil_keystore security/hil.policy.xml security/clients.policy.xml
set -euo pipefail
keystore="${1:?usage: tools/sros2_keystore.sh KEYSTORE [POLICY...]}"
shift
policies=("$@")
[ ${#policies[@]} -gt 0 ] || policies=("$(cd "$(dirname "$0")/../security" && pwd)"/*.policy.xml)
[ -d "$keystore/enclaves" ] || ros2 security create_keystore "$keystore"
# One policy a run: sros2 0.13.0 given several policy files at once died here in lxml
# ("free(): invalid size") and left enclaves out.
for policy in "${policies[@]}"; do
  ros2 security generate_artifacts -k "$keystore" -p "$policy"
done

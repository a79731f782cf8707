#!/usr/bin/env bash
# Creates (or adds to) an SROS2 keystore with the enclaves of this package's policies
# (security/*.policy.xml, or the POLICY files given): certificates and signed permissions for
# each enclave, under KEYSTORE/enclaves. Needs `ros2 security` (sros2) on PATH, i.e. a sourced
# ROS 2. Keys are made here, dated from now, readable by their owner only: never commit a
# keystore, and keep its private/ (the CA's keys) off the machines that only run or use the
# arm. docs/security.md.
#   tools/sros2_keystore.sh ~/arm_hil_keystore
#   tools/sros2_keystore.sh ~/arm_hil_keystore security/hil.policy.xml security/clients.policy.xml
set -euo pipefail
umask 077
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
chmod -R go-rwx "$keystore"
# sros2 first signs an enclave with its default permissions (everything on every topic), then
# with the policy's: an enclave a failed run left so, or one a policy names and the keystore
# lacks, fails this script.
python3 - "$keystore" "${policies[@]}" <<'PY'
import pathlib, sys
import xml.etree.ElementTree as ET
keystore, policies = pathlib.Path(sys.argv[1]), sys.argv[2:]
wanted = [e.get("path") for p in policies for e in ET.parse(p).getroot().iter("enclave")]
bad = []
for path in wanted:
    permissions = keystore / "enclaves" / path.lstrip("/") / "permissions.xml"
    if not permissions.is_file():
        bad.append(f"{path}: no permissions.xml")
        continue
    for rule in ET.parse(permissions).getroot().iter("allow_rule"):
        everything = [t.text for t in rule.iter("topic") if t.text in ("*", "rt/*", "rq/*Request", "rr/*Reply")
                      and any(t in section.iter("topic") for section in rule.iter("publish"))]
        if everything:
            bad.append(f"{path}: publishes {', '.join(everything)} (sros2's default permissions)")
if bad:
    sys.exit("keystore not as the policies say:\n  " + "\n  ".join(bad))
print(f"{keystore}: {len(wanted)} enclaves as the policies say")
PY

#!/usr/bin/env bash
# Builds a minimal ROS 2 underlay, Jazzy (default) or Humble, from source on Debian 12, for
# machines without ROS packages: enough to build arm_hil with colcon and run its ROS suite
# (tests/ros/run.sh): rcl, rclcpp, rclpy, Cyclone DDS, ros2cli with action/lifecycle/param/bag,
# launch, rosbag2 with MCAP and SQLite storage, robot_state_publisher, tf2_ros,
# control_msgs (FollowJointTrajectory) and sros2 (`ros2 security`, keystores and enclaves for DDS
# Security). With ROS2_CONTROL=1 also ros2_control's controller_manager
# and ros2controlcli, the controllers the package's bringups spawn (joint_state_broadcaster,
# joint_trajectory_controller, forward_command_controller, position_controllers) and
# PickNikRobotics/topic_based_ros2_control, the hardware plugin between them and the nodes.
# With FASTDDS=1 also Fast DDS and rmw_fastrtps_cpp beside Cyclone (which stays the default RMW).
# With MOVEIT=1 (which needs ROS2_CONTROL=1: MoveIt builds on its generate_parameter_library, RSL,
# angles and backward_ros) also what a move_group node needs: moveit_core, moveit_ros_planning,
# moveit_ros_move_group, moveit_kinematics (KDL), moveit_planners_ompl,
# moveit_simple_controller_manager and moveit_configs_utils for launch files. With MOVEIT_RVIZ=1
# (Jazzy, with MOVEIT=1, over an underlay that already has rviz2 built into it, ros2/rviz jazzy)
# also moveit_ros_visualization, the MotionPlanning panel of `moveit.launch.py rviz:=true`.
#
# Usage: [DISTRO=jazzy|humble] [ROS2_CONTROL=1] [FASTDDS=1] [MOVEIT=1 [MOVEIT_RVIZ=1]] MIRRORS=DIR tools/ros_underlay.sh [ROOT]
#   ROOT defaults to ~/ros_DISTRO, where .ci/run finds it and runs the ROS suite over it.
#   MIRRORS holds a bare clone of every repository it needs, at MIRRORS/OWNER+NAME/repo (where
#   GitHub is reachable: git clone --bare https://github.com/OWNER/NAME MIRRORS/OWNER+NAME/repo).
#   The script names the missing ones and stops. It makes ROOT/{src,venv,install,third_party} and
#   ROOT/cyclonedds_lo.xml (DDS on loopback only); rerunning it continues an interrupted build.
#   ROOT/src/COMMITS records the commit of every source taken.
# Then: ARM_HIL_ROS_ROOT=ROOT bash tests/ros/run.sh (which sources ROOT/venv and ROOT/install).
#
# Time on 2 cores (measured 2026-11-24): Jazzy 171 packages in 20 min 27 s; Humble 160 packages in 18 min 14 s.
# control_msgs (added 2026-11-25, jazzy 5.8.0 and humble branch heads) adds about 1 min: a rerun over
# an earlier underlay builds only it. ROS2_CONTROL=1 adds some 30 packages, a few minutes on a
# rerun over an underlay (not timed end to end: here it took two runs on each distro, the last
# 3 min 41 s on Jazzy and 1 min 53 s on Humble).
# FASTDDS=1 (measured 2026-11-26): a new Jazzy underlay with ROS2_CONTROL=1 FASTDDS=1 (and sros2),
# 208 packages, took 61 min 1 s: Fast DDS compiles for 27 min of it, and all from rmw_implementation
# up waits for it.
# MOVEIT=1 over that Jazzy underlay (measured 2026-11-26): 38 min of building in its last two runs
# (21.5 min for its first 25 packages, moveit_msgs 13 min of that; then 17.7 min moveit_core, 15.3 min
# moveit_ros_planning, 7 min moveit_planners_ompl, 6.7 min moveit_ros_move_group, and the control
# packages again for generate_parameter_library 0.4.0), some 70 min with the runs that stopped on
# what is fixed here. MOVEIT_RVIZ=1 over that underlay with rviz2 (measured 2026-11-26): 19 min 48 s,
# the first build of warehouse_ros and the four moveit_ros packages among them.
# Humble with FASTDDS=1 MOVEIT=1 over its ROS2_CONTROL=1 FASTDDS=1 underlay: 62 min (2026-11-26).
#
# The distros differ in (worked out here, and chosen below):
# - Jazzy builds rosidl_core and rosidl_dynamic_typesupport; Humble has neither.
# - Cyclone DDS releases/0.10.x on both: Humble's ros2.repos moved from 0.9.x to it in August 2023
#   (ros2/ros2 #1404), and Humble's binaries ship 0.10.x. Cyclone is built with ENABLE_SSL=ON: its
#   default, AUTO, quietly leaves out the security plugins where OpenSSL's headers are missing; ON
#   stops the build instead.
# - sros2: Humble takes its humble branch. Jazzy takes 0.13.0, its first Jazzy release: the mirror
#   has no jazzy branch, 0.13.0 is its rolling head. Its Python needs lxml and cryptography, which
#   the venv pins to 38.0.4 (Debian 12's own version): both branches pass the curve class
#   ec.SECP256R1 where cryptography 42 on warns that it wants an instance (and later ones refuse it;
#   upstream fixed that in sros2 #352, after these releases), and Humble's sros2 signs with OpenSSL's
#   PKCS7_sign through cryptography's private bindings, which stop working in 39 (its certificates
#   lose the OpenSSL handle; 40 drops the PKCS7 flags); Jazzy's 0.13.0 has the fix (760cfda). With
#   38.0.4 both create keystores and enclaves; newer cryptography would need both fixes.
# - pluginlib and class_loader have no jazzy branch: iron's is Jazzy's release; ros_environment,
#   robot_state_publisher and kdl_parser take rolling's, which reads the distro from
#   ROS_DISTRO_OVERRIDE. Humble has branches of its own for all of them.
# - rosbag2's vendor packages would download their sources: mcap (C++ v1.3.0 on Jazzy, v0.8.0 on
#   Humble), lz4 v1.9.3 and the two moodycamel queues come from the mirrors instead; Humble's
#   libyaml_vendor clones libyaml, redirected to its mirror. Humble's SQLite plugin lives in
#   rosbag2_storage_default_plugins, Jazzy's in rosbag2_storage_sqlite3.
# - Python: a venv of the system's python3; CMake is told its interpreter (PYTHON_EXECUTABLE),
#   since Humble's FindPythonExtra would otherwise take the first python3.x on PATH (a pyenv
#   shim for python3.6 on some machines).
# - yaml-cpp 0.8 is built into ROOT/install (rosbag2 needs it; Debian 12 has 0.7).
# - ros2_control (ROS2_CONTROL=1): Jazzy takes ros2_control 4.19.0, the last Jazzy release before
#   it needed sdformat_urdf (4.20 on, and so Gazebo's libraries), and the releases of its month
#   (October 2024) of the rest: ros2_controllers 4.15.0 (4.19.0 includes realtime_tools' .hpp
#   headers, which only its 2.10 on have), realtime_tools 2.7.0, control_toolbox 3.3.0 (with ros/filters),
#   generate_parameter_library 0.4.0 (January 2025; its 0.3.9 of October 2024 served until MoveIt:
#   0.4.0 is the first to put the generated headers under include/PACKAGE/, where MoveIt 2.12
#   includes them, and it keeps the old paths, which ros2_control 4.19 includes). Humble takes the
#   heads of the humble branches. Both take topic_based_ros2_control 0.3.0, which builds against
#   either hardware_interface, cpp_polyfills 1.0.2 (tl_expected and tcb_span), RSL 1.1.0.
# - Fast DDS (FASTDDS=1): Jazzy takes Fast-CDR v2.2.5, Fast-DDS v2.14.5, foonathan_memory_vendor
#   v1.3.1 and rosidl_dynamic_typesupport_fastrtps 0.1.0 (Jazzy's release; the mirror has no jazzy
#   branch); Humble Fast-CDR v1.0.24 (the tag Humble's ros2.repos pins), Fast-DDS v2.6.10 and
#   foonathan_memory_vendor v1.2.0; both the distro's branches of rmw_fastrtps (rmw_fastrtps_cpp,
#   and rmw_fastrtps_dynamic_cpp, which rmw_implementation build-depends on) and
#   rosidl_typesupport_fastrtps. These are the distros' releases of early 2025; rosdistro has since
#   moved on to patch releases of the same series (2.14.6 with Fast-CDR 2.2.7, 2.6.12 with 1.0.29).
#   Debian's libfastrtps-dev (2.9.1) fits neither distro. foonathan_memory_vendor takes Debian's
#   libfoonathan-memory-dev (0.7.2); were it missing, it would clone foonathan/memory: from the
#   mirror. Fast DDS is built with SECURITY=ON (DDS Security, as ROS's binaries have it) and
#   SQLITE3_SUPPORT=OFF: its persistence service (unused by ROS) compiles in SQLite's amalgamation,
#   sqlite3.c, whose 8 MiB the snapshot lacks, so the archive leaves it out.
#   rmw_fastrtps_cpp refuses messages without Fast DDS type support, and an interface package gets
#   the type supports whose generators are installed when CMake configures it. A new underlay is
#   ordered right by colcon (rosidl_default_generators, via rosidl_core_generators on Jazzy, depends
#   on the Fast DDS generators when they are in the workspace). FASTDDS=1 over an underlay built
#   without it: the script finds the installed interface packages (members of
#   rosidl_interface_packages) that lack lib<package>__rosidl_typesupport_fastrtps_cpp.so, builds
#   the generators, then configures and builds those packages again (--cmake-force-configure)
#   before the usual build, one above the rmw layer (Humble's libstatistics_collector) once Fast
#   DDS's rmw is built (its first try of 2026-12-05 stopped there). By hand the same is `colcon build --packages-above
#   rosidl_typesupport_fastrtps_cpp --cmake-force-configure`, which also rebuilds all above them.
# - MoveIt (MOVEIT=1, with ROS2_CONTROL=1): Jazzy takes moveit2 2.12.3, not 2.12.4 (Jazzy's latest
#   release): 2.12.4 links the target ompl::ompl, which OMPL has only from 1.7.0 on, where 2.12.3
#   still takes OMPL_INCLUDE_DIRS and OMPL_LIBRARIES, so it builds with Debian's libompl-dev 1.5.2
#   (every OMPL planner class it names is in 1.5.2) instead of a 10 min OMPL build; moveit_msgs
#   2.6.0 and tier4/osqp_vendor 0.2.0, whose clone of osqp v0.6.2 and its qdldl submodule comes
#   from the mirrors (ROOT/third_party/osqp, put where the vendor's ExternalProject takes a URL).
#   Humble takes moveit2 2.5.9 (with Debian's OMPL as well; it has no osqp) and moveit_msgs 2.2.1,
#   Humble's releases. Both take srdfdom 2.0.7, object_recognition_msgs 2.0.0, launch_param_builder
#   0.1.1 (moveit_configs_utils imports it), the ros2 branches of octomap_msgs (2.0.0),
#   geometric_shapes (2.3.2), random_numbers (2.0.1), eigen_stl_containers (1.0.0) and xacro (2.0.10;
#   launch_param_builder imports it), as their mirrors hold them (rosdistro has newer releases,
#   untagged there), ruckig v0.9.2 (its examples and tests off, through a colcon.pkg), and resource_retriever:
#   rolling's head (3.4.0, Jazzy's first release, which the mirror holds for want of a jazzy
#   branch; the same one an rviz2 build on top of this underlay takes) on Jazzy, humble on Humble; its
#   libcurl_vendor takes Debian's libcurl4-openssl-dev and downloads nothing. Debian gives FCL,
#   OctoMap, Assimp, Bullet, Qhull, fmt and Boost (Boost.Random too, for random_numbers). moveit_ros_planning_interface (MoveGroupInterface)
#   is left out: it would add warehouse_ros and moveit_ros_warehouse, and move_group needs neither.
# - MOVEIT_RVIZ=1: the MotionPlanning panel needs moveit_ros_planning_interface after all, and with
#   it moveit_ros_warehouse, moveit_ros_robot_interaction and warehouse_ros (2.0.5, its ros2 branch's
#   last release). Only on Jazzy, the distro rviz2 is built for here.
set -euo pipefail
mirror="${MIRRORS:?set MIRRORS to the folder that holds the bare clones, MIRRORS/OWNER+NAME/repo}"
distro="${DISTRO:-jazzy}"
root="${1:-$HOME/ros_$distro}"
d="$distro"
# Entries are OWNER/NAME:BRANCH[:PATH]; the same on both distros but for these:
case "$distro" in
  jazzy) only="ros2/rosidl_core:jazzy ros2/rosidl_dynamic_typesupport:jazzy ros2/sros2:0.13.0"
         old="ros/pluginlib:iron ros/class_loader:iron ros/ros_environment:rolling
              ros/robot_state_publisher:rolling ros/kdl_parser:rolling:kdl_parser" ;;
  humble) only="ros2/sros2:humble"
          old="ros/pluginlib:humble ros/class_loader:humble ros/ros_environment:humble
               ros/robot_state_publisher:humble ros/kdl_parser:humble:kdl_parser" ;;
  *) echo "DISTRO must be jazzy or humble" >&2; exit 1 ;;
esac
repos="
ament/ament_cmake:$d ament/ament_index:$d ament/ament_package:$d ament/ament_lint:$d
eclipse-cyclonedds/cyclonedds:releases/0.10.x
ros2/rcutils:$d ros2/rcpputils:$d ros2/rcl:$d ros2/rcl_interfaces:$d ros2/rcl_logging:$d
ros2/rmw:$d ros2/rmw_implementation:$d ros2/rmw_cyclonedds:$d ros2/rmw_dds_common:$d
ros2/rosidl:$d ros2/rosidl_defaults:$d $only
ros2/rosidl_python:$d ros2/rosidl_runtime_py:$d ros2/rosidl_typesupport:$d
ros2/unique_identifier_msgs:$d ros2/common_interfaces:$d ros2/libyaml_vendor:$d
ros2/spdlog_vendor:$d ros2/rpyutils:$d ros2/ros2_tracing:$d ros2/rclpy:$d ros2/launch:$d
ros2/launch_ros:$d ros2/ros2cli:$d ros2/rosbag2:$d ros2/rclcpp:$d ros2/pybind11_vendor:$d
ros2/yaml_cpp_vendor:$d ros2/ament_cmake_ros:$d ros-tooling/keyboard_handler:$d
ros-tooling/libstatistics_collector:$d ros2/tinyxml2_vendor:$d ros2/python_cmake_module:$d
ros2/console_bridge_vendor:$d $old
ros2/urdf:ros2 ros/urdfdom:jazzy ros/urdfdom_headers:jazzy
ros2/orocos_kdl_vendor:$d ros2/geometry2:$d ros2/message_filters:$d ros2/eigen3_cmake_module:$d
ros-controls/control_msgs:$d
"
if [ "${ROS2_CONTROL:-0}" = 1 ]; then
  case "$distro" in
    jazzy) repos="$repos ros-controls/ros2_control:4.19.0 ros-controls/ros2_controllers:4.15.0
                  ros-controls/realtime_tools:2.7.0 ros-controls/control_toolbox:3.3.0
                  PickNikRobotics/generate_parameter_library:0.4.0 ros/diagnostics:ros2-jazzy" ;;
    humble) repos="$repos ros-controls/ros2_control:humble ros-controls/ros2_controllers:humble
                   ros-controls/realtime_tools:humble ros-controls/control_toolbox:humble
                   PickNikRobotics/generate_parameter_library:humble" ;;
  esac
  repos="$repos ros/filters:ros2 ros/angles:ros2 pal-robotics/backward_ros:foxy-devel
         PickNikRobotics/RSL:1.1.0 PickNikRobotics/cpp_polyfills:1.0.2
         PickNikRobotics/topic_based_ros2_control:0.3.0"
  control_packages="controller_manager ros2controlcli joint_state_broadcaster joint_trajectory_controller
                    forward_command_controller position_controllers topic_based_ros2_control"
fi
if [ "${FASTDDS:-0}" = 1 ]; then
  case "$distro" in
    jazzy) repos="$repos eProsima/Fast-CDR:v2.2.5 eProsima/Fast-DDS:v2.14.5 eProsima/foonathan_memory_vendor:v1.3.1
                  ros2/rosidl_dynamic_typesupport_fastrtps:0.1.0" ;;
    humble) repos="$repos eProsima/Fast-CDR:v1.0.24 eProsima/Fast-DDS:v2.6.10 eProsima/foonathan_memory_vendor:v1.2.0" ;;
  esac
  repos="$repos ros2/rmw_fastrtps:$d ros2/rosidl_typesupport_fastrtps:$d"
  fastdds_packages="rmw_fastrtps_cpp rmw_fastrtps_dynamic_cpp"
fi
if [ "${MOVEIT:-0}" = 1 ]; then
  [ "${ROS2_CONTROL:-0}" = 1 ] || { echo "MOVEIT=1 needs ROS2_CONTROL=1 (generate_parameter_library, RSL, angles...)" >&2; exit 1; }
  case "$distro" in
    jazzy) repos="$repos moveit/moveit2:2.12.3 moveit/moveit_msgs:2.6.0 ros/resource_retriever:rolling
                  tier4/osqp_vendor:0.2.0"
           moveit_extra="osqp/osqp osqp/qdldl" ;;
    humble) repos="$repos moveit/moveit2:2.5.9 moveit/moveit_msgs:2.2.1 ros/resource_retriever:humble" ;;
  esac
  repos="$repos wg-perception/object_recognition_msgs:2.0.0 OctoMap/octomap_msgs:ros2 moveit/srdfdom:2.0.7
         moveit/geometric_shapes:ros2 moveit/random_numbers:ros2 ros/eigen_stl_containers:ros2 pantor/ruckig:v0.9.2
         PickNikRobotics/launch_param_builder:0.1.1 ros/xacro:ros2"
  moveit_packages="moveit_ros_move_group moveit_planners_ompl moveit_kinematics moveit_simple_controller_manager
                   moveit_configs_utils"
fi
if [ "${MOVEIT_RVIZ:-0}" = 1 ]; then
  [ "${MOVEIT:-0}" = 1 ] && [ "$distro" = jazzy ] || { echo "MOVEIT_RVIZ=1 needs MOVEIT=1 on Jazzy" >&2; exit 1; }
  [ -d "$root/install/share/rviz2" ] || { echo "MOVEIT_RVIZ=1 needs rviz2 in $root: build ros2/rviz (jazzy branch) into it first" >&2; exit 1; }
  repos="$repos moveit/warehouse_ros:2.0.5"
  moveit_packages="$moveit_packages moveit_ros_visualization"
fi
extra="foxglove/mcap cameron314/readerwriterqueue cameron314/concurrentqueue lz4/lz4 jbeder/yaml-cpp osrf/osrf_pycommon yaml/libyaml"
missing=""
for r in $repos $extra ${moveit_extra:-}; do
  name="${r%%:*}"; [ -d "$mirror/${name/\//+}/repo" ] || missing="$missing $name"
done
[ -z "$missing" ] || { echo "clone these into $mirror first:$missing" >&2; exit 1; }

mkdir -p "$root/src"
for r in $repos; do
  # OWNER/NAME:BRANCH[:PATH] - PATH takes one folder of the repository (its snapshot may lack the rest)
  name="${r%%:*}"; ref="${r#*:}"; path=""
  case "$ref" in *:*) path="${ref#*:}"; ref="${ref%%:*}";; esac
  dir="$mirror/${name/\//+}/repo"
  dest="$root/src/${name#*/}"
  # a mirror taken before its jazzy branch was cut holds the jazzy release on its main branch
  git --git-dir="$dir" rev-parse -q --verify "$ref^{commit}" >/dev/null || ref=HEAD
  commit=$(git --git-dir="$dir" rev-parse "$ref")
  if [ -d "$dest" ]; then
    # a source taken at another commit than this script now names (its last line in COMMITS) is
    # taken again, and built with what depends on it, all configured anew (below)
    had=$(awk -v n="$name" '$1 == n { c = $3 } END { print c }' "$root/src/COMMITS")
    { [ -z "$had" ] || [ "$had" = "$commit" ]; } && continue
    rm -rf "$dest"; retaken="${retaken:-} $dest"
  fi
  rm -rf "$dest.part"; mkdir -p "$dest.part"
  # files that a snapshot lacks (4 MiB and more) are left out of the archive by name
  case "$name" in
    eProsima/Fast-DDS) skip=":(exclude)src/cpp/rtps/persistence/sqlite3.c" ;;
    *) skip="" ;;
  esac
  echo "$name $ref $commit $path" >> "$root/src/COMMITS"
  git --git-dir="$dir" archive "$ref" -- ${path:-.} $skip | tar -x -C "$dest.part"
  mv "$dest.part" "$dest"
done

# Sources that rosbag2's vendor packages would download: the same commits, from mirrors.
tp="$root/third_party"
case "$distro" in
  jazzy) mcap_tag=releases/cpp/v1.3.0; sqlite=rosbag2_storage_sqlite3 ;;
  humble) mcap_tag=releases/cpp/v0.8.0; sqlite=rosbag2_storage_default_plugins ;;
esac
if [ ! -d "$tp/mcap" ]; then
  mkdir -p "$tp/mcap" "$tp/readerwriterqueue" "$tp/concurrentqueue" "$tp/lz4"
  git --git-dir="$mirror/foxglove+mcap/repo" archive "$mcap_tag" | tar -x -C "$tp/mcap"
  git --git-dir="$mirror/lz4+lz4/repo" archive d44371841a2f1728a3f36839fd4b7e872d0927d3 | tar -x -C "$tp/lz4"
  git --git-dir="$mirror/cameron314+readerwriterqueue/repo" archive ef7dfbf553288064347d51b8ac335f1ca489032a \
    | tar -x -C "$tp/readerwriterqueue"
  git --git-dir="$mirror/cameron314+concurrentqueue/repo" archive 8f65a8734d77c3cc00d74c0532efca872931d3ce \
    | tar -x -C "$tp/concurrentqueue"
  sed -i -e "s|URL https://github.com/cameron314/readerwriterqueue/archive/.*zip|URL $tp/readerwriterqueue|" \
    -e "s|URL https://github.com/cameron314/concurrentqueue/archive/.*zip|URL $tp/concurrentqueue|" \
    -e '/URL_MD5 /d' "$root/src/rosbag2/shared_queues_vendor/CMakeLists.txt"
fi

# Humble's vendor packages clone from GitHub where Debian's library does not satisfy them: clone
# from the mirrors instead.
if [ "$distro" = humble ]; then
  sed -i "s|GIT_REPOSITORY https://github.com/yaml/libyaml.git|GIT_REPOSITORY $mirror/yaml+libyaml/repo|" \
    "$root/src/libyaml_vendor/CMakeLists.txt"
fi

# foonathan_memory_vendor takes Debian's foonathan_memory; were it missing, it would clone it: from the mirror.
[ ! -f "$root/src/foonathan_memory_vendor/CMakeLists.txt" ] || sed -i \
  "s|GIT_REPOSITORY https://github.com/foonathan/memory.git|GIT_REPOSITORY $mirror/foonathan+memory/repo|" \
  "$root/src/foonathan_memory_vendor/CMakeLists.txt"

# osqp_vendor (MoveIt on Jazzy) would clone osqp v0.6.2 and its qdldl submodule: a copy of both from the
# mirrors instead, and ruckig builds neither its examples nor its tests (both on by default).
if [ -f "$root/src/osqp_vendor/CMakeLists.txt" ] && [ ! -d "$tp/osqp" ]; then
  mkdir -p "$tp/osqp.part/lin_sys/direct/qdldl/qdldl_sources"
  git --git-dir="$mirror/osqp+osqp/repo" archive v0.6.2 | tar -x -C "$tp/osqp.part"
  git --git-dir="$mirror/osqp+qdldl/repo" archive \
    "$(git --git-dir="$mirror/osqp+osqp/repo" rev-parse v0.6.2:lin_sys/direct/qdldl/qdldl_sources)" \
    | tar -x -C "$tp/osqp.part/lin_sys/direct/qdldl/qdldl_sources"
  mv "$tp/osqp.part" "$tp/osqp"
fi
if [ -f "$root/src/osqp_vendor/CMakeLists.txt" ]; then
  sed -i -e "s|GIT_REPOSITORY https://github.com/osqp/osqp.git|URL $tp/osqp|" -e '/GIT_TAG \${git_tag}/d' \
    -e '/GIT_SHALLOW ON/d' "$root/src/osqp_vendor/CMakeLists.txt"
fi
[ ! -d "$root/src/ruckig" ] || echo '{"cmake-args": ["-DBUILD_EXAMPLES=OFF", "-DBUILD_TESTS=OFF"]}' > "$root/src/ruckig/colcon.pkg"

# Test-only packages stay out (BUILD_TESTING is off).
for p in rcl_interfaces/test_msgs rmw_implementation/test_rmw_implementation rosbag2/rosbag2_test_common \
    rosbag2/rosbag2_test_msgdefs rosbag2/rosbag2_tests rosbag2/rosbag2_performance rosbag2/rosbag2_examples \
    rosbag2/rosbag2_storage_mcap_testdata rosbag2/rosbag2_storage_evaluation; do
  [ ! -d "$root/src/$p" ] || touch "$root/src/$p/COLCON_IGNORE"
done

# Debian packages in place of the other vendored libraries, and the Python tools.
apt-get install -y -qq cmake g++ python3-venv python3-dev libyaml-dev libspdlog-dev libtinyxml2-dev \
  libssl-dev libsqlite3-dev libzstd-dev liblz4-dev libyaml-cpp-dev pybind11-dev libclang-dev bison libconsole-bridge-dev libeigen3-dev liborocos-kdl-dev libtinyxml-dev \
  >/dev/null
[ "${FASTDDS:-0}" != 1 ] || apt-get install -y -qq libasio-dev libfoonathan-memory-dev >/dev/null
[ "${MOVEIT:-0}" != 1 ] || apt-get install -y -qq libfcl-dev liboctomap-dev libassimp-dev libbullet-dev libqhull-dev \
  libompl-dev libcurl4-openssl-dev libfmt-dev pkg-config libboost-filesystem-dev libboost-date-time-dev \
  libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-iostreams-dev libboost-chrono-dev \
  libboost-regex-dev libboost-serialization-dev libboost-random-dev >/dev/null
[ "${ROS2_CONTROL:-0}" != 1 ] || apt-get install -y -qq libboost-dev libfmt-dev libdw-dev libcap-dev libexpected-dev python3-pygraphviz >/dev/null
if [ ! -d "$root/venv" ]; then
  python3 -m venv --system-site-packages "$root/venv"
  "$root/venv/bin/pip" install -q colcon-common-extensions "empy==3.3.4" lark catkin_pkg numpy pyyaml \
    psutil netifaces packaging "setuptools==70.0.0"
  opc=$(mktemp -d); git --git-dir="$mirror/osrf+osrf_pycommon/repo" archive HEAD | tar -x -C "$opc"
  "$root/venv/bin/pip" install -q "$opc"
fi
# sros2's Python dependencies; see the header for why cryptography 38.0.4
"$root/venv/bin/pip" install -q lxml "cryptography==38.0.4"
# generate_parameter_library's generator, for the controllers' parameters
[ "${ROS2_CONTROL:-0}" != 1 ] || "$root/venv/bin/pip" install -q jinja2 typeguard

cat > "$root/cyclonedds_lo.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<CycloneDDS xmlns="https://cdds.io/config">
  <Domain Id="any">
    <General><Interfaces><NetworkInterface name="lo"/></Interfaces></General>
  </Domain>
</CycloneDDS>
XML

# yaml-cpp 0.8 (rosbag2 needs it; Debian 12 has 0.7), installed where colcon's packages look first.
if [ ! -f "$root/install/lib/cmake/yaml-cpp/yaml-cpp-config.cmake" ]; then
  ysrc=$(mktemp -d); git --git-dir="$mirror/jbeder+yaml-cpp/repo" archive 0.8.0 | tar -x -C "$ysrc"
  cmake -S "$ysrc" -B "$ysrc/build" -DCMAKE_BUILD_TYPE=Release -DYAML_BUILD_SHARED_LIBS=ON \
    -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF "-DCMAKE_INSTALL_PREFIX=$root/install" >/dev/null
  cmake --build "$ysrc/build" -j2 --target install >/dev/null
fi

cd "$root"
. venv/bin/activate
export RMW_IMPLEMENTATION=rmw_cyclonedds_cpp
# ros_environment has no jazzy branch; its rolling branch takes the distro name from here
[ "$distro" = humble ] || export ROS_DISTRO_OVERRIDE="$distro"
cmake_args=(-DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release -DENABLE_SHM=OFF -DTRACETOOLS_DISABLED=ON
  -DRMW_IMPLEMENTATION_DISABLE_RUNTIME_SELECTION=OFF "-DPYTHON_EXECUTABLE=$root/venv/bin/python3"
  "-DFETCHCONTENT_SOURCE_DIR_MCAP=$tp/mcap" "-DFETCHCONTENT_SOURCE_DIR_LZ4=$tp/lz4" -DENABLE_SSL=ON
  -DSECURITY=ON -DSQLITE3_SUPPORT=OFF)
build() {
  colcon build --base-paths "$root/src" --merge-install --install-base "$root/install" --parallel-workers 2 \
    "$@" --cmake-args "${cmake_args[@]}" --event-handlers console_cohesion- status-
}
# FASTDDS=1 over an underlay built without it: its interface packages were generated without Fast DDS
# type support (the generators are picked when CMake configures), and rmw_fastrtps_cpp would refuse
# their messages. Build the generators, then configure and build again every interface package that
# is installed without its Fast DDS type support library.
if [ "${FASTDDS:-0}" = 1 ]; then
  stale=""
  for x in $(grep -rl --include=package.xml '<member_of_group>rosidl_interface_packages<' "$root/src"); do
    p=$(sed -n 's|.*<name>\(.*\)</name>.*|\1|p' "$x" | head -1)
    [ ! -f "$root/src/$(dirname "${x#$root/src/}")/COLCON_IGNORE" ] || continue
    [ -d "$root/install/share/$p" ] && [ ! -e "$root/install/lib/lib${p}__rosidl_typesupport_fastrtps_cpp.so" ] \
      && stale="$stale $p"
  done
  if [ -n "$stale" ]; then
    build --packages-up-to rosidl_typesupport_fastrtps_c rosidl_typesupport_fastrtps_cpp
    # A stale package above the middleware itself (Humble's libstatistics_collector, through
    # rmw_implementation, which build-depends on every rmw in the workspace) is configured again
    # once Fast DDS's rmw is built; the others at once (Fast DDS's rmw needs some of them).
    above_rmw=" $(colcon list --base-paths "$root/src" --names-only --packages-above rmw_fastrtps_shared_cpp | tr '\n' ' ') "
    early="" late=""
    for p in $stale; do
      case "$above_rmw" in *" $p "*) late="$late $p" ;; *) early="$early $p" ;; esac
    done
    [ -z "$early" ] || build --packages-select $early --cmake-force-configure
    if [ -n "$late" ]; then
      build --packages-up-to rmw_fastrtps_cpp rmw_fastrtps_dynamic_cpp
      build --packages-select $late --cmake-force-configure
    fi
  fi
fi
targets="rclpy rmw_cyclonedds_cpp ros2cli ros2topic ros2param ros2node ros2run ros2pkg
    ros2launch ros2action ros2interface ros2service ros2lifecycle launch_ros sensor_msgs trajectory_msgs diagnostic_msgs geometry_msgs std_msgs nav_msgs
    std_srvs visualization_msgs ros_environment
    rosgraph_msgs ros2bag rosbag2_storage_mcap $sqlite rosbag2_transport
    robot_state_publisher tf2_ros tf2_msgs control_msgs sros2 ${control_packages:-} ${fastdds_packages:-}
    ${moveit_packages:-}"
# Sources taken again at another commit: they and everything above them among the targets are
# configured anew (CMake does not notice that, say, generate_parameter_library's code generation changed).
[ -z "${retaken:-}" ] || build --packages-up-to $targets --cmake-force-configure \
  --packages-above $(colcon list --base-paths $retaken --names-only)
build --packages-up-to $targets

//! The package's interface files (`msg/`, `action/`) against the Rust structs that mirror them.
//!
//! Every file is parsed with the ROS 2 interface grammar (field and constant lines, comments,
//! primitive, nested, fixed, bounded and unbounded array types, an action's `---` sections), and
//! every field list is compared, in order, with what serde sees of the mirror struct: the CDR the
//! nodes send is that serde view, so a renamed, retyped or reordered field fails here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use arm_hil::msg::interfaces::*;
use arm_hil::msg::{Header, Vector3};
use serde::ser::{self, Serialize};

// ---- the interface grammar ----

/// A field's type: its base (`float64`, `geometry_msgs/Point`, `CartesianWaypoint`) and array form.
#[derive(Debug, Clone, PartialEq)]
struct FieldType {
    base: String,
    array: Array,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Array {
    No,
    Fixed(usize),
    Bounded(usize),
    Unbounded,
}

#[derive(Debug, Clone, PartialEq)]
struct Field {
    name: String,
    ty: FieldType,
}

/// One message (or one section of an action): fields in order, and constants by name.
#[derive(Debug, Default)]
struct Definition {
    fields: Vec<Field>,
    constants: BTreeMap<String, (String, String)>,
}

const PRIMITIVES: [&str; 17] = [
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
    "uint64", "string", "wstring", "duration", "time",
];

fn parse_type(text: &str) -> Result<FieldType, String> {
    let (base, array) = match text.find('[') {
        None => (text, Array::No),
        Some(open) => {
            let inner = text[open + 1..].strip_suffix(']').ok_or(format!("`{text}`: unclosed ["))?;
            let array = match inner {
                "" => Array::Unbounded,
                bounded if bounded.starts_with("<=") => {
                    Array::Bounded(bounded[2..].parse().map_err(|_| format!("`{text}`: bad bound"))?)
                }
                fixed => Array::Fixed(fixed.parse().map_err(|_| format!("`{text}`: bad size"))?),
            };
            (&text[..open], array)
        }
    };
    let base = base.split("<=").next().unwrap_or(base); // string<=N: a bounded string is a string
    let valid_name = |part: &str| {
        part.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let valid = match base.split_once('/') {
        None => PRIMITIVES.contains(&base) || (valid_name(base) && base.starts_with(|c: char| c.is_ascii_uppercase())),
        Some((package, name)) => valid_name(package) && valid_name(name),
    };
    match valid {
        true => Ok(FieldType { base: base.to_owned(), array }),
        false => Err(format!("`{text}` is not a type")),
    }
}

fn valid_field_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_')
}

fn valid_constant_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Parses the lines of one message definition.
fn parse_definition(text: &str) -> Result<Definition, String> {
    let mut definition = Definition::default();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let at = |message: String| format!("line {}: {message}", number + 1);
        let (ty, rest) = line.split_once(char::is_whitespace).ok_or_else(|| at(format!("`{line}` has no name")))?;
        let ty = parse_type(ty).map_err(at)?;
        let rest = rest.trim();
        if let Some((name, value)) = rest.split_once('=') {
            let (name, value) = (name.trim(), value.trim());
            if !valid_constant_name(name) || value.is_empty() || ty.array != Array::No {
                return Err(at(format!("bad constant `{line}`")));
            }
            definition.constants.insert(name.to_owned(), (ty.base, value.to_owned()));
            continue;
        }
        let name = rest.split_whitespace().next().unwrap_or_default(); // a default value may follow
        if !valid_field_name(name) {
            return Err(at(format!("`{name}` is not a field name")));
        }
        if definition.fields.iter().any(|field| field.name == name) {
            return Err(at(format!("field `{name}` twice")));
        }
        definition.fields.push(Field { name: name.to_owned(), ty });
    }
    Ok(definition)
}

/// Parses a .msg file, or an .action file into its goal, result and feedback.
fn parse_file(path: &Path) -> Result<Vec<Definition>, String> {
    let text = std::fs::read_to_string(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let sections: Vec<&str> = match path.extension().and_then(|e| e.to_str()) {
        Some("msg") => vec![&text],
        Some("action") => {
            let mut sections = vec![String::new()];
            for line in text.lines() {
                match line.trim() == "---" {
                    true => sections.push(String::new()),
                    false => sections.last_mut().into_iter().for_each(|s| *s += &format!("{line}\n")),
                }
            }
            if sections.len() != 3 {
                return Err(format!("{}: {} sections, an action has 3", path.display(), sections.len()));
            }
            return sections
                .iter()
                .map(|section| parse_definition(section))
                .collect::<Result<_, _>>()
                .map_err(|error| format!("{}: {error}", path.display()));
        }
        _ => return Err(format!("{}: not an interface file", path.display())),
    };
    sections.into_iter().map(parse_definition).collect::<Result<_, _>>().map_err(|e| format!("{}: {e}", path.display()))
}

fn package_dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(kind)
}

fn interface_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["msg", "action"]
        .iter()
        .flat_map(|kind| std::fs::read_dir(package_dir(kind)).into_iter().flatten().flatten().map(|e| e.path()))
        .collect();
    files.sort();
    files
}

/// A standard type's definition (`std_msgs/Header`, `geometry_msgs/msg/PointStamped`) as the
/// bags' schemas give it: the ros2msg text of [`arm_hil::msg`], which names every type a
/// message uses after a separator line and `MSG: package/Type`.
fn standard_definition(type_name: &str) -> Option<Definition> {
    use arm_hil::msg::{PointStamped, RosMessage};
    let short = type_name.replacen("/msg/", "/", 1);
    let separator = format!("\n{}\n", "=".repeat(80));
    [<PointStamped as RosMessage>::DEF, <ArmState as RosMessage>::DEF].iter().find_map(|def| {
        let schema = def.schema();
        let mut sections = schema.split(separator.as_str());
        let own = sections.next().filter(|_| def.name.replacen("/msg/", "/", 1) == short).map(str::to_owned);
        own.or_else(|| sections.find_map(|s| s.strip_prefix(&format!("MSG: {short}\n")).map(str::to_owned)))
            .map(|text| parse_definition(&text).expect("the bags' schemas parse"))
    })
}

/// The definition a full type name (`arm_hil/msg/ArmState`, `arm_hil/action/X_Goal`,
/// `geometry_msgs/Point`) refers to: this package's from its files, the few standard ones the
/// package uses from the bags' schemas.
fn definition_of(type_name: &str) -> Definition {
    let Some(name) = type_name.strip_prefix("arm_hil/") else {
        return standard_definition(type_name).unwrap_or_else(|| panic!("{type_name} is not a type the bags know"));
    };
    let (kind, name) = name.split_once('/').unwrap_or(("msg", name));
    let (file, section) = match kind {
        "action" => {
            let (action, part) = name.rsplit_once('_').expect("action parts are Action_Part");
            let section = ["Goal", "Result", "Feedback"].iter().position(|p| *p == part).expect("a part");
            (package_dir("action").join(format!("{action}.action")), section)
        }
        _ => (package_dir("msg").join(format!("{name}.msg")), 0),
    };
    parse_file(&file).unwrap_or_else(|error| panic!("{error}")).swap_remove(section)
}

// ---- what serde sees of a struct ----

/// The shape of a serialised value.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    Primitive(&'static str),
    Struct(Vec<(&'static str, Shape)>),
    /// A fixed-size array ([T; N] serialises as a tuple).
    Fixed(usize, Box<Shape>),
    /// A sequence; its element's shape from the first element.
    Sequence(Option<Box<Shape>>),
}

#[derive(Debug)]
struct Unsupported(String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Unsupported {}
impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Unsupported(msg.to_string())
    }
}

fn unsupported<T>(what: &str) -> Result<T, Unsupported> {
    Err(Unsupported(format!("{what} has no ROS interface type")))
}

struct ShapeOf;

/// Collects the elements of a struct, tuple or sequence.
struct Elements {
    fields: Vec<(&'static str, Shape)>,
    kind: ElementsKind,
}

enum ElementsKind {
    Struct,
    Tuple,
    Sequence,
}

macro_rules! primitive {
    ($($method:ident: $type:ty => $name:literal),*) => {
        $(fn $method(self, _: $type) -> Result<Shape, Unsupported> { Ok(Shape::Primitive($name)) })*
    };
}

impl ser::Serializer for ShapeOf {
    type Ok = Shape;
    type Error = Unsupported;
    type SerializeSeq = Elements;
    type SerializeTuple = Elements;
    type SerializeTupleStruct = ser::Impossible<Shape, Unsupported>;
    type SerializeTupleVariant = ser::Impossible<Shape, Unsupported>;
    type SerializeMap = ser::Impossible<Shape, Unsupported>;
    type SerializeStruct = Elements;
    type SerializeStructVariant = ser::Impossible<Shape, Unsupported>;

    primitive!(serialize_bool: bool => "bool", serialize_i8: i8 => "int8", serialize_i16: i16 => "int16",
        serialize_i32: i32 => "int32", serialize_i64: i64 => "int64", serialize_u8: u8 => "uint8",
        serialize_u16: u16 => "uint16", serialize_u32: u32 => "uint32", serialize_u64: u64 => "uint64",
        serialize_f32: f32 => "float32", serialize_f64: f64 => "float64", serialize_str: &str => "string");

    fn serialize_char(self, _: char) -> Result<Shape, Unsupported> {
        unsupported("char")
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<Shape, Unsupported> {
        unsupported("bytes")
    }
    fn serialize_none(self) -> Result<Shape, Unsupported> {
        unsupported("Option")
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<Shape, Unsupported> {
        unsupported("Option")
    }
    fn serialize_unit(self) -> Result<Shape, Unsupported> {
        unsupported("()")
    }
    fn serialize_unit_struct(self, name: &'static str) -> Result<Shape, Unsupported> {
        unsupported(name)
    }
    fn serialize_unit_variant(self, name: &'static str, _: u32, _: &'static str) -> Result<Shape, Unsupported> {
        unsupported(name)
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, _: &T) -> Result<Shape, Unsupported> {
        unsupported(name)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Shape, Unsupported> {
        unsupported(name)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Elements, Unsupported> {
        Ok(Elements { fields: Vec::new(), kind: ElementsKind::Sequence })
    }
    fn serialize_tuple(self, _: usize) -> Result<Elements, Unsupported> {
        Ok(Elements { fields: Vec::new(), kind: ElementsKind::Tuple })
    }
    fn serialize_tuple_struct(self, name: &'static str, _: usize) -> Result<Self::SerializeTupleStruct, Unsupported> {
        unsupported(name)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        unsupported(name)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        unsupported("a map")
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Elements, Unsupported> {
        Ok(Elements { fields: Vec::new(), kind: ElementsKind::Struct })
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        unsupported(name)
    }
}

impl Elements {
    fn finish(self) -> Shape {
        let mut shapes = self.fields.into_iter().map(|(_, shape)| shape);
        match self.kind {
            ElementsKind::Struct => unreachable!("structs finish in SerializeStruct::end"),
            ElementsKind::Tuple => {
                let count = shapes.len();
                Shape::Fixed(count, Box::new(shapes.next().unwrap_or(Shape::Primitive("?"))))
            }
            ElementsKind::Sequence => Shape::Sequence(shapes.next().map(Box::new)),
        }
    }
}

/// Sequences and tuples collect their elements alike (serde's two traits have one shape).
macro_rules! collect_elements {
    ($($trait:ident),*) => {$(
        impl ser::$trait for Elements {
            type Ok = Shape;
            type Error = Unsupported;
            fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Unsupported> {
                self.fields.push(("", value.serialize(ShapeOf)?));
                Ok(())
            }
            fn end(self) -> Result<Shape, Unsupported> {
                Ok(self.finish())
            }
        }
    )*};
}
collect_elements!(SerializeSeq, SerializeTuple);

impl ser::SerializeStruct for Elements {
    type Ok = Shape;
    type Error = Unsupported;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, name: &'static str, value: &T) -> Result<(), Unsupported> {
        self.fields.push((name, value.serialize(ShapeOf)?));
        Ok(())
    }
    fn end(self) -> Result<Shape, Unsupported> {
        Ok(Shape::Struct(self.fields))
    }
}

// ---- the comparison ----

/// Where `shape` (of a struct mirroring `type_name`) differs from the type's
/// definition; nested types are followed into their own definitions.
fn differences(type_name: &str, shape: &Shape, out: &mut Vec<String>) {
    let Shape::Struct(fields) = shape else {
        return out.push(format!("{type_name}: the mirror is not a struct"));
    };
    let definition = definition_of(type_name);
    let names = |list: Vec<&str>| list.join(", ");
    if fields.len() != definition.fields.len() {
        out.push(format!(
            "{type_name}: fields [{}] in the file, [{}] in the struct",
            names(definition.fields.iter().map(|f| f.name.as_str()).collect()),
            names(fields.iter().map(|(name, _)| *name).collect()),
        ));
        return;
    }
    for (field, (name, shape)) in definition.fields.iter().zip(fields) {
        if field.name != *name {
            out.push(format!("{type_name}: field `{}` in the file, `{name}` in the struct", field.name));
            continue;
        }
        let element = match (field.ty.array, shape) {
            (Array::No, shape) => shape,
            (Array::Fixed(n), Shape::Fixed(m, element)) if n == *m => element.as_ref(),
            (Array::Bounded(_) | Array::Unbounded, Shape::Sequence(Some(element))) => element.as_ref(),
            (Array::Bounded(_) | Array::Unbounded, Shape::Sequence(None)) => {
                out.push(format!("{type_name}.{name}: give the sample value an element to check"));
                continue;
            }
            (array, shape) => {
                out.push(format!("{type_name}.{name}: {array:?} in the file, {shape:?} in the struct"));
                continue;
            }
        };
        match (field.ty.base.as_str(), element) {
            (base, Shape::Primitive(primitive)) if PRIMITIVES.contains(&base) => {
                if base != *primitive {
                    out.push(format!("{type_name}.{name}: {base} in the file, {primitive} in the struct"));
                }
            }
            (base, nested) if !PRIMITIVES.contains(&base) => {
                let nested_name = match base.contains('/') {
                    true => base.to_owned(),
                    false => format!("arm_hil/msg/{base}"),
                };
                differences(&nested_name, nested, out);
            }
            (base, other) => out.push(format!("{type_name}.{name}: {base} in the file, {other:?} in the struct")),
        }
    }
}

fn check<M: Interface>(sample: &M) -> Vec<String> {
    let mut out = Vec::new();
    match sample.serialize(ShapeOf) {
        Ok(shape) => differences(M::TYPE, &shape, &mut out),
        Err(error) => out.push(format!("{}: {error}", M::TYPE)),
    }
    out
}

/// One value of every mirror, with an element in each sequence.
fn every_mirror() -> Vec<(&'static str, Vec<String>)> {
    let goal = FollowCartesianTrajectoryGoal { waypoints: vec![CartesianWaypoint::default()] };
    vec![
        (ArmState::TYPE, check(&ArmState::default())),
        (LoopStatistics::TYPE, check(&LoopStatistics::default())),
        (LinkHealth::TYPE, check(&LinkHealth::default())),
        (Stm32Telemetry::TYPE, check(&Stm32Telemetry::default())),
        (MotorEvent::TYPE, check(&MotorEvent::default())),
        (ControlDone::TYPE, check(&ControlDone::default())),
        (DeviceError::TYPE, check(&DeviceError::default())),
        (CartesianWaypoint::TYPE, check(&CartesianWaypoint::default())),
        (FollowCartesianTrajectoryGoal::TYPE, check(&goal)),
        (FollowCartesianTrajectoryResult::TYPE, check(&FollowCartesianTrajectoryResult::default())),
        (FollowCartesianTrajectoryFeedback::TYPE, check(&FollowCartesianTrajectoryFeedback::default())),
    ]
}

#[test]
fn every_interface_file_parses() {
    let files = interface_files();
    assert!(files.len() >= 9, "{files:?}");
    for file in files {
        let sections = parse_file(&file).unwrap_or_else(|error| panic!("{error}"));
        assert!(sections.iter().all(|s| !s.fields.is_empty()), "{}: a section without fields", file.display());
    }
}

#[test]
fn every_interface_file_has_a_mirror_struct_with_its_fields_in_order() {
    let mirrors = every_mirror();
    let problems: Vec<String> = mirrors.iter().flat_map(|(_, problems)| problems.clone()).collect();
    assert!(problems.is_empty(), "{problems:#?}");
    for file in interface_files() {
        let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let covered = match file.extension().and_then(|e| e.to_str()) {
            Some("action") => ["Goal", "Result", "Feedback"]
                .iter()
                .all(|part| mirrors.iter().any(|(name, _)| *name == format!("arm_hil/action/{stem}_{part}"))),
            _ => mirrors.iter().any(|(name, _)| *name == format!("arm_hil/msg/{stem}")),
        };
        assert!(covered, "{} has no mirror struct in msg::interfaces", file.display());
    }
}

#[test]
fn the_comparison_catches_a_renamed_a_retyped_and_a_missing_field() {
    #[derive(serde::Serialize)]
    struct Renamed {
        time_from_start: f64,
        position: Vector3,
        speed: Vector3,
        acceleration: Vector3,
    }
    #[derive(serde::Serialize)]
    struct Retyped {
        time_from_start: f32,
        position: Vector3,
        velocity: Vector3,
        acceleration: Vector3,
    }
    #[derive(serde::Serialize)]
    struct Missing {
        time_from_start: f64,
        position: Vector3,
        velocity: Vector3,
    }
    for (what, sample) in [
        ("renamed", shape(&Renamed { time_from_start: 0.0, position: v(), speed: v(), acceleration: v() })),
        ("retyped", shape(&Retyped { time_from_start: 0.0, position: v(), velocity: v(), acceleration: v() })),
        ("missing", shape(&Missing { time_from_start: 0.0, position: v(), velocity: v() })),
    ] {
        let mut out = Vec::new();
        differences(CartesianWaypoint::TYPE, &sample, &mut out);
        assert_eq!(out.len(), 1, "{what}: {out:?}");
    }
}

fn v() -> Vector3 {
    Vector3::default()
}

/// What serde sees of `value`.
fn shape<T: Serialize>(value: &T) -> Shape {
    value.serialize(ShapeOf).expect("plain structs have a shape")
}

#[test]
fn the_grammar_reads_constants_defaults_and_every_array_form() {
    let definition = parse_definition(
        "uint8 STATE_UP=1 # trailing comment\nint32 a 5\nstring<=8 b\nfloat64[3] c\nfloat64[<=4] d\ngeometry_msgs/Point[] e\nCartesianWaypoint f\n",
    )
    .unwrap();
    assert_eq!(definition.constants["STATE_UP"], ("uint8".to_owned(), "1".to_owned()));
    let arrays: Vec<Array> = definition.fields.iter().map(|f| f.ty.array).collect();
    assert_eq!(arrays, [Array::No, Array::No, Array::Fixed(3), Array::Bounded(4), Array::Unbounded, Array::No]);
    assert_eq!(definition.fields[1].ty.base, "string");
    for bad in ["float64 Bad", "float64 a__b", "float64[x] a", "float 64", "uint8 lower=1", "notatype a"] {
        assert!(parse_definition(bad).is_err(), "{bad} parsed");
    }
}

#[test]
fn the_link_state_constants_are_the_files() {
    let definition = definition_of(LinkHealth::TYPE);
    for (name, value) in [
        ("STATE_WAITING", LinkHealth::STATE_WAITING),
        ("STATE_CONNECTED", LinkHealth::STATE_CONNECTED),
        ("STATE_DEGRADED", LinkHealth::STATE_DEGRADED),
        ("STATE_DISCONNECTED", LinkHealth::STATE_DISCONNECTED),
        ("STATE_FAILED", LinkHealth::STATE_FAILED),
    ] {
        assert_eq!(definition.constants[name].1, value.to_string(), "{name}");
    }
}

#[test]
fn a_header_mirror_is_the_standard_header() {
    let mut out = Vec::new();
    let shape = shape(&Header::default());
    differences("std_msgs/Header", &shape, &mut out);
    assert!(out.is_empty(), "{out:?}");
}

// ---- library data into the messages ----

use arm_hil::control::arc::ArcSpec;
use arm_hil::model::math::Vec3;
use arm_hil::model::Robot;
use arm_hil::nodes::link_health::{LinkCondition, LinkReport as Health};
use arm_hil::protocol::rdscom::{FrameType, Message, PrototypeTable, Value};
use arm_hil::sim::Frame;

fn frame() -> Frame {
    Frame {
        t: 1.5,
        x: Vec3::new(0.1, 0.2, 0.3),
        x_dot: Vec3::new(0.01, 0.02, 0.03),
        theta: Vec3::new(0.4, 0.5, 0.6),
        theta_dot: Vec3::new(-0.1, -0.2, -0.3),
        tau: Vec3::new(1.0, 2.0, 3.0),
        x_ref: Vec3::new(0.1, 0.2, 0.3 + 0.004),
        xd_ref: Vec3::new(0.0, 0.0, 0.05),
    }
}

#[test]
fn arm_state_carries_the_frames_sixteen_values_the_reference_and_the_tracking_error() {
    let state = ArmState::of(Header::at(7, "base_link"), &frame());
    assert_eq!(state.header.frame_id, "base_link");
    assert_eq!(state.time, 1.5);
    assert_eq!(state.position, Vector3 { x: 0.1, y: 0.2, z: 0.3 });
    assert_eq!(state.velocity, Vector3 { x: 0.01, y: 0.02, z: 0.03 });
    assert_eq!((state.joint_positions, state.joint_velocities), ([0.4, 0.5, 0.6], [-0.1, -0.2, -0.3]));
    assert_eq!(state.joint_efforts, [1.0, 2.0, 3.0]);
    assert_eq!(state.reference_velocity, Vector3 { x: 0.0, y: 0.0, z: 0.05 });
    assert!((state.tracking_error.z - 0.004).abs() < 1e-12 && state.tracking_error.x == 0.0);
    assert!((state.tracking_error_norm - 0.004).abs() < 1e-12);
}

#[test]
fn link_health_reports_the_links_condition_as_the_files_state_constants() {
    let mut health = Health::default();
    assert_eq!(LinkHealth::of(Header::default(), &health).state, LinkHealth::STATE_WAITING);
    health.changed(LinkCondition::Down);
    health.changed(LinkCondition::Up);
    health.resends = 2;
    health.failed_request("request 1 #4 got no acknowledgement".into());
    let message = LinkHealth::of(Header::default(), &health);
    assert_eq!(message.state, LinkHealth::STATE_CONNECTED);
    assert_eq!((message.reconnects, message.resends, message.failed_requests), (1, 2, 1));
    assert_eq!(message.last_error, "request 1 #4 got no acknowledgement");
}

/// The rdscom MotorEvent, ControlDone and Error (docs/rdscom.md), as the MCU sends them.
#[test]
fn rdscom_messages_of_the_document_become_typed_messages_in_si_units() {
    let table = PrototypeTable::document();
    let message = |prototype: &str, values: Vec<Value>| Message {
        kind: FrameType::Request,
        prototype: table.by_name(prototype).expect("in the table").id,
        number: 3,
        values,
    };
    let motor_event = message(
        "MotorEvent",
        vec![Value::Int(1), Value::Bool(true), Value::Int(0), Value::Float(1.25), Value::Int(2), Value::Int(1)],
    );
    let Some(RdscomMessage::MotorEvent(event)) = RdscomMessage::of(Header::default(), &motor_event, &table) else {
        panic!("a MotorEvent")
    };
    assert_eq!((event.motor_id, event.success, event.event_type), (1, true, 0));
    assert_eq!((event.event_value, event.num_in_queue, event.executed_with_count), (1.25, 2, 1));

    let done = message("ControlDone", vec![Value::Bool(true), Value::Int(1500), Value::Int(4)]);
    assert_eq!(
        RdscomMessage::of(Header::default(), &done, &table),
        Some(RdscomMessage::ControlDone(ControlDone {
            header: Header::default(),
            success: true,
            duration: 1.5,
            executed: 4
        }))
    );

    let error = message("Error", vec![Value::Int(7)]);
    let Some(RdscomMessage::DeviceError(error)) = RdscomMessage::of(Header::default(), &error, &table) else {
        panic!("a DeviceError")
    };
    assert_eq!((error.prototype, error.error_code, error.description.as_str()), (9, 7, "Error 7"));

    let heartbeat = message("Heartbeat", vec![Value::Int(5)]);
    assert_eq!(RdscomMessage::of(Header::default(), &heartbeat, &table), None);
}

fn arc_goal(robot: &Robot) -> FollowCartesianTrajectoryGoal {
    let waypoints = ArcSpec::default().waypoints(&robot.elbow(), robot.params().l_arm).expect("the built-in arc");
    FollowCartesianTrajectoryGoal {
        waypoints: waypoints
            .iter()
            .map(|w| CartesianWaypoint {
                time_from_start: w.t,
                position: Vector3::from(&w.x),
                velocity: Vector3::from(&w.xd),
                acceleration: Vector3::from(&w.xdd),
            })
            .collect(),
    }
}

#[test]
fn a_goal_becomes_the_trajectory_of_its_waypoints_and_feedback_follows_it() {
    let robot = Robot::new(Default::default()).expect("the default robot");
    let goal = arc_goal(&robot);
    let trajectory = goal.trajectory(&robot).expect("the arc is a valid trajectory");
    assert_eq!(trajectory.waypoints().len(), goal.waypoints.len());
    let (start, end) = (trajectory.start_time(), trajectory.end_time());
    let halfway = Frame { t: (start + end) / 2.0, ..frame() };
    let feedback = FollowCartesianTrajectoryFeedback::at(&trajectory, &halfway);
    assert!((feedback.progress - 0.5).abs() < 1e-12, "{feedback:?}");
    assert!((feedback.time_from_start - (end - start) / 2.0).abs() < 1e-12);
    assert!((feedback.tracking_error - 0.004).abs() < 1e-12);
    let after = FollowCartesianTrajectoryFeedback::at(&trajectory, &Frame { t: end + 1.0, ..frame() });
    assert_eq!(after.progress, 1.0);
}

#[test]
fn a_goal_that_is_no_trajectory_is_refused_with_the_reason() {
    let robot = Robot::new(Default::default()).expect("the default robot");
    let error = FollowCartesianTrajectoryGoal::default().trajectory(&robot).expect_err("no waypoints");
    let result = FollowCartesianTrajectoryResult::refused(&error);
    assert!(!result.success);
    assert_eq!(result.message, "refused: a trajectory needs at least one waypoint");
    let mut far = arc_goal(&robot);
    far.waypoints[10].position.z += 5.0;
    assert!(far.trajectory(&robot).is_err(), "a waypoint 5 m away");
}

// ---- type hashes ----

/// The full name (`package/msg/Type`) of a field's nested type, as written in `package`'s files.
fn nested_name(base: &str, package: &str) -> String {
    match base.split_once('/') {
        Some((package, name)) => format!("{package}/msg/{name}"),
        None => format!("{package}/msg/{base}"),
    }
}

/// The field's type id in type_description_interfaces/FieldType, with its array offset.
fn type_id(ty: &FieldType) -> u32 {
    let base = match ty.base.as_str() {
        "int8" => 2,
        "uint8" | "char" => 3,
        "int16" => 4,
        "uint16" => 5,
        "int32" => 6,
        "uint32" => 7,
        "int64" => 8,
        "uint64" => 9,
        "float32" => 10,
        "float64" => 11,
        "bool" => 15,
        "byte" => 16,
        "string" => 17,
        "wstring" => 18,
        _ => 1,
    };
    base + match ty.array {
        Array::No => 0,
        Array::Fixed(_) => 48,
        Array::Bounded(_) => 96,
        Array::Unbounded => 144,
    }
}

/// The hashed JSON of one type's description: its name and fields, without default values.
fn description_json(type_name: &str) -> (String, Vec<String>) {
    let package = type_name.split('/').next().unwrap_or_default();
    let definition = definition_of(type_name);
    let mut nested = Vec::new();
    let fields: Vec<String> = definition
        .fields
        .iter()
        .map(|field| {
            let nested_type = match type_id(&field.ty) % 48 {
                1 => nested_name(&field.ty.base, package),
                _ => String::new(),
            };
            if !nested_type.is_empty() {
                nested.push(nested_type.clone());
            }
            let capacity = match field.ty.array {
                Array::Fixed(n) | Array::Bounded(n) => n,
                Array::No | Array::Unbounded => 0,
            };
            format!(
                "{{\"name\": \"{}\", \"type\": {{\"type_id\": {}, \"capacity\": {capacity}, \"string_capacity\": 0, \"nested_type_name\": \"{nested_type}\"}}}}",
                field.name,
                type_id(&field.ty)
            )
        })
        .collect();
    (format!("{{\"type_name\": \"{type_name}\", \"fields\": [{}]}}", fields.join(", ")), nested)
}

/// The RIHS01 hash of `type_name` (REP-2011): SHA-256 of the JSON of its description and of
/// every type it refers to, sorted by name, as rosidl writes it.
fn rihs01(type_name: &str) -> String {
    use sha2::{Digest, Sha256};
    let (top, mut pending) = description_json(type_name);
    let mut referenced = BTreeMap::new();
    while let Some(name) = pending.pop() {
        if let std::collections::btree_map::Entry::Vacant(entry) = referenced.entry(name) {
            let (json, nested) = description_json(entry.key());
            entry.insert(json);
            pending.extend(nested);
        }
    }
    let referenced: Vec<String> = referenced.into_values().collect();
    let json =
        format!("{{\"type_description\": {top}, \"referenced_type_descriptions\": [{}]}}", referenced.join(", "));
    let digest = Sha256::digest(json.as_bytes());
    format!("RIHS01_{}", digest.iter().map(|byte| format!("{byte:02x}")).collect::<String>())
}

#[test]
fn type_hashes_are_worked_out_as_rosidl_does() {
    use arm_hil::msg::{PointStamped, RosMessage};
    assert_eq!(rihs01("geometry_msgs/msg/PointStamped"), PointStamped::TYPE_HASH, "as ros2 bag record wrote it");
}

#[test]
fn the_published_messages_carry_the_hash_of_their_file() {
    use arm_hil::msg::RosMessage;
    fn hash_of_file<M: RosMessage + Interface>() -> (&'static str, String) {
        (M::TYPE_HASH, rihs01(M::TYPE))
    }
    for (recorded, worked_out) in [
        hash_of_file::<ArmState>(),
        hash_of_file::<LoopStatistics>(),
        hash_of_file::<LinkHealth>(),
        hash_of_file::<Stm32Telemetry>(),
        hash_of_file::<MotorEvent>(),
        hash_of_file::<ControlDone>(),
        hash_of_file::<DeviceError>(),
    ] {
        assert_eq!(recorded, worked_out, "update the published! hash after editing the .msg file");
    }
}

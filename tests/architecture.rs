//! The invariants of docs/design.md ("Invariants"), checked over the source: what each layer may
//! use, what is deliberately absent where, and the shape of the tree (no folders that import
//! each other in a circle, no file over 600 lines, every file named in the design's map).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The library's top-level modules in layer order, as src/lib.rs lists them: each may use only
/// those before it.
const LAYERS: [&str; 15] = [
    "msg", "model", "control", "sim", "hil", "protocol", "serial", "drivers", "bridge", "emulate", "outputs", "bag",
    "live", "nodes", "ros",
];

const MAX_LINES: usize = 600;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The library's files (the binaries left out), each with its path under src/.
fn library_files() -> Vec<(String, String)> {
    rust_files(&src())
        .into_iter()
        .map(|path| (path.strip_prefix(src()).unwrap().display().to_string(), std::fs::read_to_string(&path).unwrap()))
        .filter(|(name, _)| !name.starts_with("bin/"))
        .collect()
}

/// The lines of `text` that are code: comments and doc comments left out.
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|line| !line.starts_with("//"))
}

/// The crate paths `text` refers to (`crate::a::b`, `super::c` resolved from `module`), as
/// module paths; `pub use` re-exports and `mod` lines are not uses.
fn uses(module: &[String], text: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in code_lines(text) {
        if line.starts_with("pub use") || line.starts_with("pub mod") || line.starts_with("mod ") {
            continue;
        }
        let mut rest = line;
        while let Some(start) = ["crate::", "super::"].iter().filter_map(|p| rest.find(p).map(|i| (i, *p))).min() {
            let (index, prefix) = start;
            let preceded = rest[..index].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
            let whole = rest[index..].split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).next().unwrap();
            let path: Vec<&str> = whole.split("::").filter(|s| !s.is_empty()).collect();
            rest = &rest[index + whole.len().max(prefix.len())..];
            if preceded {
                continue;
            }
            let mut resolved: Vec<String> = match prefix {
                "crate::" => Vec::new(),
                _ => module[..module.len().saturating_sub(1)].to_vec(),
            };
            let mut segments = path[1..].iter();
            for segment in segments.by_ref() {
                match *segment {
                    "super" => drop(resolved.pop()),
                    other => {
                        resolved.push(other.to_owned());
                        break;
                    }
                }
            }
            resolved.extend(segments.map(|s| (*s).to_owned()));
            found.push(resolved);
        }
    }
    found
}

/// `nodes/sil/run.rs` as its module path: nodes, sil, run.
fn module_of(name: &str) -> Vec<String> {
    let mut parts: Vec<String> = name.trim_end_matches(".rs").split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|last| last == "mod" || last == "lib") {
        parts.pop();
    }
    parts
}

#[test]
fn the_checks_see_crate_and_super_paths_and_skip_re_exports() {
    let module = module_of("nodes/sil/run.rs");
    assert_eq!(module, ["nodes", "sil", "run"]);
    let text = "use crate::hil::LoopStatus;\nuse super::SilNodeSettings;\npub use crate::ros::x;\n// crate::bag\nlet a = super::super::joints::f();";
    let found: Vec<String> = uses(&module, text).iter().map(|path| path.join("::")).collect();
    assert_eq!(found, ["hil::LoopStatus", "nodes::sil::SilNodeSettings", "nodes::joints::f"]);
}

#[test]
fn each_layer_uses_only_the_layers_before_it() {
    let mut broken = Vec::new();
    for (name, text) in library_files() {
        let module = module_of(&name);
        let Some(here) = module.first().and_then(|top| LAYERS.iter().position(|layer| layer == top)) else { continue };
        for used in uses(&module, &text) {
            let Some(there) = used.first().and_then(|top| LAYERS.iter().position(|layer| layer == top)) else {
                continue;
            };
            if there > here {
                broken.push(format!("src/{name} uses {}", used.join("::")));
            }
        }
    }
    assert!(broken.is_empty(), "a layer uses one after it:\n{}", broken.join("\n"));
}

#[test]
fn the_message_model_depends_on_nothing_of_the_crate() {
    for (name, text) in library_files().iter().filter(|(name, _)| name.starts_with("msg/")) {
        for used in uses(&module_of(name), text) {
            assert_eq!(used.first().map(String::as_str), Some("msg"), "src/{name} uses {}", used.join("::"));
        }
    }
}

#[test]
fn r2r_is_used_only_under_src_ros() {
    for path in rust_files(&src()) {
        let name = path.strip_prefix(src()).unwrap().display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        if !name.starts_with("ros/") {
            assert!(!code_lines(&text).any(|line| line.contains("r2r")), "src/{name} uses r2r");
        }
    }
}

#[test]
fn no_publishing_decision_is_made_in_src_ros_or_src_bin() {
    // What decides what a node publishes and when: decimation, status schedules and texts, the
    // joints worked out from a frame, the arm's topics themselves.
    const DECISIONS: [&str; 7] = [
        "Decimator",
        "Schedule",
        "ArmTopics",
        "arm_joint_state",
        "IdealTorques::new(&robot, &trajectory).map_while",
        "status.set(",
        "loop_status(",
    ];
    for path in rust_files(&src()) {
        let name = path.strip_prefix(src()).unwrap().display().to_string();
        if !(name.starts_with("ros/") || name.starts_with("bin/")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for line in code_lines(&text) {
            for decision in DECISIONS {
                assert!(!line.contains(decision), "src/{name} decides what to publish: {line}");
            }
        }
    }
}

#[test]
fn protocols_are_sans_io() {
    const IO: [&str; 6] = ["std::net", "tokio", "serialport", "std::thread", "std::fs", "Instant::now"];
    for (name, text) in library_files().iter().filter(|(name, _)| name.starts_with("protocol/")) {
        for line in code_lines(text) {
            for io in IO {
                assert!(!line.contains(io), "src/{name} does I/O: {line}");
            }
        }
    }
}

#[test]
fn no_folders_import_each_other_in_a_circle() {
    // Folder -> folders its files use.
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, text) in library_files() {
        let here = Path::new(&name).parent().unwrap().display().to_string();
        let edges = graph.entry(here.clone()).or_default();
        for used in uses(&module_of(&name), &text) {
            // The longest prefix of the path that is a file or a folder's mod.rs.
            let there = (1..=used.len()).rev().find_map(|k| {
                let path = used[..k].join("/");
                if src().join(format!("{path}.rs")).is_file() {
                    Some(Path::new(&path).parent().unwrap().display().to_string())
                } else if src().join(&path).join("mod.rs").is_file() {
                    Some(path)
                } else {
                    None
                }
            });
            if let Some(there) = there.filter(|there| *there != here) {
                edges.insert(there);
            }
        }
    }
    for start in graph.keys() {
        // Folders reachable from `start`: none may lead back to it.
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&String> = graph[start].iter().collect();
        while let Some(folder) = todo.pop() {
            assert!(folder != start, "src/{start} imports itself through other folders: {seen:?}");
            if seen.insert(folder.clone()) {
                todo.extend(graph.get(folder).into_iter().flatten());
            }
        }
    }
}

/// The body of each function `name` in `text`: up to the next item at its own indentation.
fn function_bodies<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let signature = format!("fn {name}(");
    text.match_indices(&signature)
        .map(|(at, _)| {
            let indent = text[..at].rsplit('\n').next().unwrap_or("");
            let close = format!("\n{indent}}}");
            let end = text[at..].find(&close).map_or(text.len(), |end| at + end);
            &text[at..end]
        })
        .collect()
}

#[test]
fn the_hil_cycle_takes_no_blocking_lock() {
    // docs/hil.md and docs/safety.md: inside the cycle only try_lock and atomics; the loop
    // itself, and each backend's read and write, which the cycle calls.
    let read = |name: &str| std::fs::read_to_string(src().join(name)).unwrap();
    // Each function the cycle calls there, found (a function moved away fails here, rather
    // than leaving the check with nothing to read).
    let bodies = |name: &str, functions: &[&str]| {
        let text = read(name);
        functions
            .iter()
            .map(|function| {
                let bodies = function_bodies(&text, function).concat();
                assert!(!bodies.is_empty(), "no fn {function} in {name}");
                bodies
            })
            .collect::<String>()
    };
    let runner = bodies("hil/runner.rs", &["cycle_until_done", "protect"]);
    // The loop's intake and its side of the withdrawals.
    let feed = bodies("hil/feed.rs", &["withdraw", "fill", "end", "reach_mark", "pending", "continues", "done"]);
    let mut blocking: Vec<String> = Vec::new();
    for (name, text) in [("hil/runner.rs", runner), ("hil/feed.rs", feed)].into_iter().chain(
        ["drivers/robotscara.rs", "hil/sim_rig.rs"].into_iter().map(|name| {
            let text = read(name);
            let cycle = ["read", "write", "offer_rates", "check_failure"];
            (name, cycle.iter().flat_map(|f| function_bodies(&text, f)).collect::<String>())
        }),
    ) {
        for (line, code) in code_lines(&text).enumerate() {
            if code.contains(".lock()") || code.contains(".recv()") || code.contains(".wait(") {
                blocking.push(format!("{name}: {line}: {}", code.trim()));
            }
        }
    }
    assert!(blocking.is_empty(), "the HIL cycle may block on:\n{}", blocking.join("\n"));
}

#[test]
fn no_file_under_src_is_over_600_lines() {
    for path in rust_files(&src()) {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert!(lines <= MAX_LINES, "{} has {lines} lines", path.display());
    }
}

#[test]
fn the_design_map_names_every_file_under_src() {
    let design = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md")).unwrap();
    let missing: Vec<String> = rust_files(&src())
        .into_iter()
        .map(|path| format!("src/{}", path.strip_prefix(src()).unwrap().display()))
        .filter(|name| !design.contains(&format!("`{name}`")))
        .collect();
    assert!(missing.is_empty(), "docs/design.md does not name:\n{}", missing.join("\n"));
}

#[test]
fn comments_cite_the_protocols_by_their_page_in_docs() {
    // A comment citing a source by one of the phrases below names a source the repository does
    // not hold, unless a docs/ page is named on the same or the previous line.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cites = |comment: &str| {
        let lower = comment.to_lowercase();
        ["the spec", "the document", "the reference"].iter().any(|phrase| {
            lower.match_indices(phrase).any(|(at, _)| {
                let after = lower[at + phrase.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
            })
        })
    };
    let mut uncited = Vec::new();
    for folder in ["src", "tests", "benches", "fuzz/src", "fuzz/fuzz_targets", "examples", "tools", "launch", ".ci"] {
        let mut files = Vec::new();
        let mut todo = vec![root.join(folder)];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                match path.extension().and_then(|ext| ext.to_str()) {
                    _ if path.is_dir() => todo.push(path),
                    Some("rs" | "py" | "sh") => files.push(path),
                    _ => {}
                }
            }
        }
        for path in files {
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let marker = if path.extension().is_some_and(|ext| ext == "rs") { "//" } else { "#" };
            for (index, line) in lines.iter().enumerate() {
                let trimmed = line.trim();
                let comment = match trimmed.find(marker) {
                    Some(at) => &trimmed[at..],
                    None if trimmed.starts_with("\"\"\"") => trimmed,
                    None => continue,
                };
                let pointed = line.contains("docs/") || index > 0 && lines[index - 1].contains("docs/");
                if cites(comment) && !pointed {
                    uncited.push(format!("{}:{}: {trimmed}", path.strip_prefix(root).unwrap().display(), index + 1));
                }
            }
        }
    }
    assert!(uncited.is_empty(), "comments citing a source without its docs/ page:\n{}", uncited.join("\n"));
}

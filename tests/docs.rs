//! The documentation set holds together: every relative link and anchor in README.md and docs/
//! resolves, every page under docs/ is reachable from the README, the parameter tables of
//! docs/ros.md give the values of the parameter files in config/, the `ros2 interface show`
//! block of docs/ros.md holds msg/ArmState.msg line for line, and a figure quoted from
//! docs/performance.md is one it holds.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Component, Path, PathBuf};

use serde_norway::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every Markdown file under docs/, relative to the repository.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, relative: &Path, out: &mut Vec<PathBuf>) {
        for entry in fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = relative.join(entry.file_name());
            if path.is_dir() {
                walk(&path, &name, out);
            } else if name.extension().is_some_and(|extension| extension == "md") {
                out.push(name);
            }
        }
    }
    let mut pages = vec![PathBuf::from("README.md")];
    walk(&root().join("docs"), Path::new("docs"), &mut pages);
    pages.sort();
    pages
}

/// The page's lines outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|marker| trimmed.starts_with(marker));
        match (fence, marker) {
            (None, Some(marker)) => fence = Some(marker),
            (Some(open), Some(marker)) if open == marker => fence = None,
            (None, None) => lines.push((index + 1, line)),
            _ => {}
        }
    }
    lines
}

/// `line` without its code spans (a run of backticks up to the same run).
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Link and image targets of a page: `[text](target)`, `![alt](target)`, and the `src` and
/// `href` of HTML tags, outside code.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in prose(text) {
        let line = without_code(line);
        let mut rest = line.as_str();
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            found.push((number, target.trim_matches(|c| c == '<' || c == '>').to_string()));
            rest = &after[end..];
        }
        for attribute in ["src=\"", "href=\""] {
            let mut rest = line.as_str();
            while let Some(start) = rest.find(attribute) {
                let after = &rest[start + attribute.len()..];
                let end = after.find('"').unwrap_or(after.len());
                found.push((number, after[..end].to_string()));
                rest = &after[end..];
            }
        }
    }
    found
}

/// A heading's anchor as GitHub makes it: lower case, letters, digits, `-` and `_` kept, spaces
/// to `-`, everything else dropped.
fn slug(heading: &str) -> String {
    without_code_marks(heading)
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

fn without_code_marks(heading: &str) -> String {
    heading.replace('`', "")
}

/// Every anchor of a page: its headings' (a repeated one gets `-1`, `-2`, ...) and explicit
/// `id="..."` or `name="..."` attributes.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = slug(line[hashes..].trim());
            let count = seen.entry(base.clone()).or_insert(0);
            anchors.insert(if *count == 0 { base.clone() } else { format!("{base}-{count}") });
            *count += 1;
        }
        for attribute in ["id=\"", "name=\""] {
            let mut rest = line;
            while let Some(start) = rest.find(attribute) {
                let after = &rest[start + attribute.len()..];
                let end = after.find('"').unwrap_or(after.len());
                anchors.insert(after[..end].to_string());
                rest = &after[end..];
            }
        }
    }
    anchors
}

/// `path` with `.` and `..` worked out, or None when it leaves the repository.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(part) => out.push(part),
            _ => return None,
        }
    }
    Some(out)
}

/// Where a relative link of `page` leads: the file (relative to the repository) and the anchor.
fn resolve(page: &Path, target: &str) -> Option<(PathBuf, String)> {
    let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if file.is_empty() { page.to_path_buf() } else { normalise(&page.parent().unwrap().join(file))? };
    Some((file, anchor.to_string()))
}

fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = root();
    let mut broken = Vec::new();
    for page in pages() {
        let text = fs::read_to_string(root.join(&page)).unwrap();
        for (number, target) in links(&text) {
            if is_external(&target) {
                continue;
            }
            let place = format!("{}:{number}: {target}", page.display());
            let Some((file, anchor)) = resolve(&page, &target) else {
                broken.push(format!("{place}: leaves the repository"));
                continue;
            };
            let path = root.join(&file);
            if target.is_empty() || !path.exists() {
                broken.push(format!("{place}: no such file"));
            } else if !anchor.is_empty() {
                match fs::read_to_string(&path) {
                    Ok(linked) if file.extension().is_some_and(|extension| extension == "md") => {
                        if !anchors(&linked).contains(&anchor) {
                            broken.push(format!("{place}: no heading gives #{anchor}"));
                        }
                    }
                    _ => broken.push(format!("{place}: an anchor into a file that is not a page")),
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_under_docs_is_reachable_from_the_readme() {
    let root = root();
    let mut reached = BTreeSet::from([PathBuf::from("README.md")]);
    let mut queue = VecDeque::from([PathBuf::from("README.md")]);
    while let Some(page) = queue.pop_front() {
        let text = fs::read_to_string(root.join(&page)).unwrap();
        for (_, target) in links(&text) {
            if is_external(&target) {
                continue;
            }
            if let Some((file, _)) = resolve(&page, &target) {
                if file.extension().is_some_and(|extension| extension == "md")
                    && root.join(&file).is_file()
                    && reached.insert(file.clone())
                {
                    queue.push_back(file);
                }
            }
        }
    }
    let unreached: Vec<String> =
        pages().into_iter().filter(|page| !reached.contains(page)).map(|page| page.display().to_string()).collect();
    assert!(unreached.is_empty(), "pages no link from the README leads to:\n{}", unreached.join("\n"));
}

#[test]
fn the_link_checker_finds_links_anchors_and_code() {
    let text = "# A `code` heading: here\n\nSee [a](b.md#c) and ![d](img/e.svg), `[not](this.md)`.\n\
                ```sh\n[nor](that.md)\n```\n<img src=\"f.png\">\n## A `code` heading: here\n";
    let targets: Vec<String> = links(text).into_iter().map(|(_, target)| target).collect();
    assert_eq!(targets, ["b.md#c", "img/e.svg", "f.png"]);
    assert_eq!(anchors(text), BTreeSet::from(["a-code-heading-here".to_string(), "a-code-heading-here-1".to_string()]));
    assert_eq!(slug("Managed nodes: `ros2 lifecycle`"), "managed-nodes-ros2-lifecycle");
    assert_eq!(slug("§1 The package"), "1-the-package");
    assert_eq!(slug("The device commands' bags"), "the-device-commands-bags");
    assert_eq!(resolve(Path::new("docs/ros.md"), "../README.md#x"), Some(("README.md".into(), "x".into())));
    assert_eq!(resolve(Path::new("docs/ros.md"), "#y"), Some(("docs/ros.md".into(), "y".into())));
    assert_eq!(resolve(Path::new("README.md"), "../outside.md"), None);
}

/// A parameter file's parameters, dotted (`hil.protection.lag_cycles`), with their values.
fn parameters(file: &str) -> BTreeMap<String, Value> {
    fn flatten(prefix: &str, value: &Value, out: &mut BTreeMap<String, Value>) {
        match value {
            Value::Mapping(mapping) => {
                for (key, value) in mapping {
                    let key = key.as_str().expect("a parameter's name is a string");
                    let name = if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
                    flatten(&name, value, out);
                }
            }
            leaf => {
                out.insert(prefix.to_string(), leaf.clone());
            }
        }
    }
    let text = fs::read_to_string(root().join("config").join(file)).unwrap();
    let document: Value = serde_norway::from_str(&text).unwrap();
    let mut out = BTreeMap::new();
    let nodes = document.as_mapping().expect("a parameter file is a mapping");
    for (_, node) in nodes {
        flatten("", &node["ros__parameters"], &mut out);
    }
    out
}

/// The names in a table cell: its code spans.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

#[test]
fn the_parameter_tables_give_the_parameter_files_values() {
    let page = fs::read_to_string(root().join("docs/ros.md")).unwrap();
    let mut problems = Vec::new();
    let mut tables = 0;
    let lines: Vec<&str> = page.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let Some(file) = line.strip_prefix("### ").and_then(|heading| heading.split("(`config/").nth(1)) else {
            continue;
        };
        let file = file.split('`').next().unwrap();
        tables += 1;
        let file_parameters = parameters(file);
        let mut named = BTreeSet::new();
        let rows = lines[index + 1..].iter().take_while(|line| !line.starts_with('#'));
        for row in rows.filter(|row| row.starts_with("| `")) {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let names = code_spans(cells[0]);
            let value = cells[1];
            for name in names {
                let place = format!("docs/ros.md, {file}, `{name}`");
                if value.starts_with("not in the file") {
                    if file_parameters.contains_key(&name) {
                        problems.push(format!("{place}: said not in the file, but it is"));
                    }
                    continue;
                }
                if name.contains('*') {
                    problems.push(format!("{place}: a group's row says \"not in the file\""));
                    continue;
                }
                let Some(in_file) = file_parameters.get(&name) else {
                    problems.push(format!("{place}: not a parameter of the file"));
                    continue;
                };
                let text = value.strip_prefix('`').and_then(|value| value.strip_suffix('`'));
                match text.map(serde_norway::from_str::<Value>) {
                    Some(Ok(on_page)) if &on_page == in_file => {}
                    _ => problems.push(format!("{place}: the page gives {value}, the file {in_file:?}")),
                }
                named.insert(name);
            }
        }
        for name in file_parameters.keys().filter(|name| !named.contains(*name)) {
            problems.push(format!("docs/ros.md, {file}: no row for `{name}`"));
        }
    }
    assert!(tables >= 6, "docs/ros.md has {tables} parameter tables, one per node's file expected");
    assert!(problems.is_empty(), "parameter tables:\n{}", problems.join("\n"));
}

#[test]
fn the_interface_shown_is_the_message_file() {
    let page = fs::read_to_string(root().join("docs/ros.md")).unwrap();
    let command = "$ ros2 interface show arm_hil/msg/ArmState";
    let block: Vec<&str> = page
        .lines()
        .skip_while(|line| *line != command)
        .skip(1)
        .take_while(|line| !line.starts_with("```"))
        .filter(|line| !line.starts_with(' '))
        .collect();
    let file = fs::read_to_string(root().join("msg/ArmState.msg")).unwrap();
    let file: Vec<&str> = file.trim_end().lines().collect();
    assert!(!block.is_empty(), "docs/ros.md shows no `{command}`");
    assert_eq!(block, file, "docs/ros.md's `ros2 interface show` block and msg/ArmState.msg differ");
}

/// The numbers written in `text`, as written: digits, with their decimal part.
fn numbers(text: &str) -> Vec<String> {
    numbered(text).into_iter().map(|(_, number)| number).collect()
}

/// Each number of `text`, a thousands' space in it taken as written (`1 198` is 1198: a first
/// group of one to three digits, not 0, then groups of three), with where it ends.
fn numbered(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<(usize, char)> = text.char_indices().chain(std::iter::once((text.len(), ' '))).collect();
    let digit_at = |k: usize| chars.get(k).is_some_and(|(_, c)| c.is_ascii_digit());
    let (mut found, mut number) = (Vec::new(), String::new());
    // Whether the number began after no letter or digit (not `p50`), and its digits since its
    // start or its last thousands' space.
    let (mut standalone, mut group) = (false, 0);
    for (k, &(at, c)) in chars.iter().enumerate() {
        match c {
            '0'..='9' => {
                if number.is_empty() {
                    standalone = k == 0 || !chars[k - 1].1.is_alphanumeric();
                }
                number.push(c);
                group += 1;
            }
            '.' if !number.is_empty() && !number.contains('.') => number.push(c),
            ' ' if standalone
                && !number.starts_with('0')
                && !number.contains('.')
                && (group == 3 || (group <= 3 && group == number.len()))
                && (1..=3).all(|n| digit_at(k + n))
                && !digit_at(k + 4) =>
            {
                group = 0;
            }
            _ if !number.is_empty() => {
                found.push((at, std::mem::take(&mut number).trim_end_matches('.').to_owned()));
                group = 0;
            }
            _ => {}
        }
    }
    found
}

/// Every number docs/performance.md states.
fn held_figures() -> BTreeSet<String> {
    numbers(&fs::read_to_string(root().join("docs/performance.md")).unwrap()).into_iter().collect()
}

#[test]
fn a_figure_quoted_from_performance_md_is_one_it_holds() {
    let held = held_figures();
    let mut problems = Vec::new();
    for page in pages().into_iter().filter(|page| page != Path::new("docs/performance.md")) {
        let text = fs::read_to_string(root().join(&page)).unwrap();
        // The README's table of headline figures, and every line that sends its reader to
        // performance.md for a figure it gives.
        let mut in_table = false;
        for (line_number, line) in prose(&text) {
            if page == Path::new("README.md") {
                in_table = match line.starts_with("## ") {
                    true => line == "## Performance",
                    false => in_table,
                };
            }
            let quoting = (in_table && line.starts_with('|')) || line.contains("performance.md");
            if !quoting {
                continue;
            }
            for number in numbers(&without_code(line)).into_iter().filter(|number| !held.contains(number)) {
                problems.push(format!("{}:{line_number}: {number} is not in docs/performance.md", page.display()));
            }
        }
    }
    assert!(problems.is_empty(), "figures quoted from docs/performance.md:\n{}", problems.join("\n"));
}

/// The numbers of `line` that state a measured figure: those followed by the unit of something
/// this project measures (a tracking or joint error, jitter, memory, CPU, a rate at a subscriber,
/// a speed-up over real time), each of a range `A - B unit` or a pair `A / B unit` included.
/// Settings and bounds in the same units count too: performance.md holds the figures they are
/// set against. Units written once for a table's column are not read.
fn measured_figures(line: &str) -> Vec<String> {
    const UNITS: [&str; 9] =
        [" mm", " us", " µs", " mrad", " MiB", "% of a core", " % of a core", " msg/s", " times real time"];
    let line = without_code(line);
    let mut figures = Vec::new();
    let mut joined = Vec::new();
    for (end, number) in numbered(&line) {
        let after = &line[end..];
        joined.push(number);
        let joins = [" - ", " / "]
            .iter()
            .any(|join| after.starts_with(join) && after[join.len()..].starts_with(|c: char| c.is_ascii_digit()));
        if joins {
            continue;
        }
        if UNITS.iter().any(|unit| after.starts_with(unit) && !after[unit.len()..].starts_with(char::is_alphanumeric)) {
            figures.append(&mut joined);
        }
        joined.clear();
    }
    figures
}

/// Every measured figure a page states, outside its code, is one docs/performance.md holds: a
/// figure has one number, kept there with its date and the command that redoes it. Not read:
/// docs/decisions.md, whose figures are the history behind each decision, and docs/model.md,
/// whose figures are the model's exact results (its convergence table, redone to the digit by
/// `cargo run --release --example convergence`).
#[test]
fn a_measured_figure_on_any_page_is_one_performance_md_holds() {
    let held = held_figures();
    let mut problems = Vec::new();
    let unread = ["docs/performance.md", "docs/decisions.md", "docs/model.md"];
    for page in pages().into_iter().filter(|page| !unread.iter().any(|name| page == Path::new(name))) {
        let text = fs::read_to_string(root().join(&page)).unwrap();
        for (line_number, line) in prose(&text) {
            for figure in measured_figures(line).into_iter().filter(|figure| !held.contains(figure)) {
                problems.push(format!("{}:{line_number}: {figure} is not in docs/performance.md", page.display()));
            }
        }
    }
    assert!(problems.is_empty(), "measured figures that docs/performance.md does not hold:\n{}", problems.join("\n"));
}

#[test]
fn measured_figures_are_the_numbers_with_a_unit_of_measurement() {
    assert_eq!(
        measured_figures("RMS 0.82 - 2.14 mm, p99 32 us at 250 Hz, `0.5 mm` in code, 12.0 % of a core, 3 runs"),
        ["0.82", "2.14", "32", "12.0"]
    );
    assert_eq!(measured_figures("a 5 mmol solution, 1 - 2 s"), Vec::<String>::new());
    assert_eq!(measured_figures("max 373 - 1 198 us, 11.3 / 12.0 % of a core"), ["373", "1198", "11.3", "12.0"]);
}

#[test]
fn numbers_are_read_as_written() {
    assert_eq!(numbers("15.4 - 16.5 ms, 600 times (p99 32 us)."), ["15.4", "16.5", "600", "99", "32"]);
    assert_eq!(numbers("in 4 000 runs, max 1 198 us"), ["4000", "1198"]);
    assert_eq!(numbers("p50 680 us, 0 100, 1234 567"), ["50", "680", "0", "100", "1234", "567"]);
}

//! The drawings of docs/img: the arm, drawn from the model's own kinematics; the reference rig's
//! wiring; the crate's layers. Each is SVG text that comes out the same every time, so the files
//! in docs/img are exactly what this writes, which its test checks.
//!
//! Run with `cargo run --example drawings` (writes docs/img/arm.svg, rig_wiring.svg and
//! architecture.svg; a folder as its argument writes them there instead).

mod architecture;
mod arm;
mod svg;
mod wiring;

use std::path::{Path, PathBuf};

use anyhow::Context;

/// What draws one picture: its SVG text.
type Draw = fn() -> String;

/// Each drawing's file name and what draws it.
const DRAWINGS: [(&str, Draw); 3] =
    [("arm.svg", arm::drawing), ("rig_wiring.svg", wiring::drawing), ("architecture.svg", architecture::drawing)];

fn docs_img() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img")
}

fn main() -> anyhow::Result<()> {
    let folder = std::env::args_os().nth(1).map(PathBuf::from).unwrap_or_else(docs_img);
    for (name, draw) in DRAWINGS {
        let path = folder.join(name);
        std::fs::write(&path, draw()).with_context(|| format!("cannot write {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

#[test]
fn each_drawing_in_docs_img_is_what_this_example_makes() {
    for (name, draw) in DRAWINGS {
        let committed = std::fs::read_to_string(docs_img().join(name)).unwrap_or_default();
        assert!(committed == draw(), "docs/img/{name} is not what `cargo run --example drawings` makes: run it");
    }
}

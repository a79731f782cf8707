//! Writes every target's seeds (the package's own valid messages) into fuzz/corpus/TARGET/,
//! where `cargo fuzz run TARGET` starts from them.

use std::path::Path;

fn main() -> std::io::Result<()> {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (name, _) in harness::TARGETS {
        let dir = corpus.join(name);
        std::fs::create_dir_all(&dir)?;
        let seeds = harness::seeds(name);
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed_{i}")), seed)?;
        }
        println!("{name}: {} seeds in {}", seeds.len(), dir.display());
    }
    Ok(())
}

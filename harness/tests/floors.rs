//! The harness's library modules stand on floors and import only the floors below their own
//! (ARCHITECTURE.md, "Invariants"): no cycles, no edge up. Read from the source: every
//! `crate::<module>` path (and `crate::{a, b}` group) in a module's files.
use std::collections::BTreeMap;
use std::path::Path;

/// Each library module's floor, lowest first.
const FLOORS: &[(&str, u32)] = &[
    ("paths", 0),
    ("logging", 0),
    ("trainer", 0),
    ("text", 0),
    ("catalog", 1),
    ("series", 2),
    ("data", 2),
    ("verdict", 3),
    ("run", 4),
    ("present", 5),
    ("profile", 5),
];

fn floor(module: &str) -> Option<u32> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|&(_, f)| f)
}

/// The modules `text` names after `crate::`: `crate::run::x` → run, `crate::{a, b::c}` → a, b.
fn named(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(group.split(',').map(|p| ident(p.trim())));
            }
            None => out.push(ident(rest)),
        }
    }
    out
}

/// Every `.rs` file under `dir` (or `dir` itself when it is a file).
fn sources(dir: &Path) -> Vec<std::path::PathBuf> {
    if dir.is_file() {
        return vec![dir.to_path_buf()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// Each edge that goes up a floor or sideways to another module of the same floor.
fn bad_edges(src: &Path) -> BTreeMap<String, Vec<String>> {
    let mut bad = BTreeMap::new();
    for &(module, own) in FLOORS.iter().filter(|(m, _)| *m != "trainer") {
        let dir = [src.join(module), src.join(format!("{module}.rs"))];
        let dir = dir.iter().find(|p| p.exists()).expect("every floor's module exists");
        for file in sources(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            for target in named(&text) {
                let f = floor(&target);
                if target != module && f.is_some_and(|f| f >= own) {
                    let rel = file.strip_prefix(src).unwrap().display().to_string();
                    bad.entry(rel).or_insert_with(Vec::new).push(target);
                }
            }
        }
    }
    bad
}

#[test]
fn every_module_imports_only_the_floors_below_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    for line in lib.lines().filter_map(|l| l.strip_prefix("pub mod ")) {
        let module = line.trim_end_matches([';', ' ', '{']);
        assert!(floor(module).is_some(), "lib.rs's module {module} has no floor in FLOORS");
    }
    let bad = bad_edges(&src);
    assert!(bad.is_empty(), "imports up a floor or sideways (file: modules): {bad:#?}");
}

#[test]
fn the_reader_finds_single_and_grouped_paths() {
    let text = "use crate::run::x;\nuse crate::{catalog::Id, series};\nlet y = crate::text::figures::loss(1.0);";
    assert_eq!(named(text), ["run", "catalog", "series", "text"]);
}

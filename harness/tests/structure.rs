//! The harness's shape, read from its source: its library modules stand on floors and import
//! only the floors below their own (ARCHITECTURE.md, "Invariants"; every `crate::<module>` path
//! and `crate::{a, b}` group in a module's files), and no function of the harness or of the newest
//! trainer is over 80 lines.
use std::collections::BTreeMap;
use std::path::Path;

/// Each library module's floor, lowest first.
const FLOORS: &[(&str, u32)] = &[
    ("paths", 0),
    ("logging", 0),
    ("trainer", 0),
    ("text", 0),
    ("toml_file", 0),
    ("catalog", 1),
    ("series", 2),
    ("data", 2),
    ("cost", 2),
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

/// The longest a function may be, from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 80;

/// Each function of `text` longer than [`MAX_FN_LINES`]: its name and length. A function ends
/// at the first line that is its indent and `}`, as rustfmt writes it.
fn long_functions(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let after_vis = body.strip_prefix("pub ").or_else(|| {
            let rest = body.strip_prefix("pub(")?;
            Some(rest.split_once(") ")?.1)
        });
        let Some(sig) = after_vis.unwrap_or(body).strip_prefix("fn ") else { continue };
        let sig_end = lines[i..].iter().find(|l| l.trim_end().ends_with(['{', ';']));
        if sig_end.is_none_or(|l| l.trim_end().ends_with(';')) {
            continue; // a declaration without a body (an `extern` block's, one or more lines)
        }
        let end = lines[i..].iter().position(|l| l.strip_prefix(indent) == Some("}"));
        let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if let Some(len) = end.map(|e| e + 1).filter(|&len| len > MAX_FN_LINES) {
            out.push((name, len));
        }
    }
    out
}

/// The harness's `src/` and the newest trainer's (the checkout's `src/`, HEAD's: older trees
/// are as their records made them).
#[test]
fn no_function_of_the_harness_or_the_trainer_is_over_80_lines() {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = Vec::new();
    for src in [manifest_dir.join("src"), manifest_dir.join("../src")] {
        let files = sources(&src);
        assert!(files.len() > 10, "{} has the crate's sources", src.display());
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let rel = file.display().to_string();
            long.extend(
                long_functions(&text).into_iter().map(|(f, n)| format!("{rel}: {f} {n} lines")),
            );
        }
    }
    assert!(long.is_empty(), "split these into named steps: {long:#?}");
}

#[test]
fn a_function_is_measured_from_fn_to_its_brace() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let text = format!(
        "pub(crate) fn long() {{\n{}}}\n\nfn short() {{\n{}}}\n    fn inner(x: u8);\n\
         extern \"C\" {{\n    fn decl(\n        x: u8,\n    ) -> u8;\n{}}}\n",
        body(80),
        body(78),
        body(90)
    );
    assert_eq!(long_functions(&text), [("long".to_string(), 82)]);
}

/// The technique modules: files with a registry entry of their own, and whether the entry's
/// key is a section (`pub struct Section`) or a value (a switch, or a choice the module names).
fn technique_modules(src: &Path) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for file in sources(src) {
        let text = std::fs::read_to_string(&file).unwrap();
        if text.contains("pub const TECHNIQUE: Technique") {
            let rel = file.strip_prefix(src).unwrap();
            let dir = rel.parent().unwrap().display().to_string();
            let stem = rel.file_stem().unwrap().to_string_lossy().into_owned();
            let section = text.lines().any(|l| l.starts_with("pub struct Section "));
            out.push((dir, stem, section));
        }
    }
    out.sort();
    out
}

/// The types a value key keeps in the Recipe: a switch, a count, a number, a per-layer pattern,
/// a list; any other is its module's own (`norm::Kind`).
const VALUE_TYPES: &[&str] = &[
    "bool",
    "u64",
    "Option<f64>",
    "Option<u64>",
    "Option<usize>",
    "Option<String>",
    "Option<Vec<usize>>",
];

/// A technique whose recipe key is its own (`[recipe.bigram_hash]`, a switch such as `unet`, a
/// number such as `skip_gate = -1.5`, a pattern or list such as `mlp_layers = "-MMM"`, or a
/// choice such as `sa_lambdas = "qkv_o"`) keeps its registry entry, and the key's type, in its
/// module, under the module's name; the Recipe names the key in one field, the registry the entry
/// in one line, and the CLI mounts the module (its libtorch half left out), once each.
#[test]
fn a_recipe_section_lives_in_its_technique_module_and_is_named_once() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let modules = technique_modules(&root.join("src"));
    assert!(modules.iter().filter(|m| m.2).count() >= 4, "sections found: {modules:?}");
    assert!(modules.iter().any(|m| !m.2), "no switch module found: {modules:?}");
    let (recipe, registry, cli) =
        (read("src/recipe.rs"), read("src/recipe/registry.rs"), read("harness/src/lib.rs"));
    let count = |text: &str, needle: &str| text.matches(needle).count();
    for (dir, stem, section) in &modules {
        let file = read(&format!("src/{dir}/{stem}.rs"));
        // An upstream record's key (`technique("unet"`) or one only Act 1 has (`act1("no_bias"`).
        let entries = |text: &str| {
            count(text, &format!("technique(\"{stem}\"")) + count(text, &format!("act1(\"{stem}\""))
        };
        assert_eq!(entries(&file), 1, "src/{dir}/{stem}.rs: its TECHNIQUE names {stem}");
        assert_eq!(entries(&registry), 0, "registry.rs writes {stem}'s entry again");
        let listed = format!("    {dir}::{stem}::TECHNIQUE,\n");
        assert_eq!(count(&registry, &listed), 1, "registry.rs lists {dir}::{stem}::TECHNIQUE");
        let field = format!("pub {stem}: ");
        let lines: Vec<_> = recipe.lines().filter(|l| l.trim_start().starts_with(&field)).collect();
        let place = format!("// src/{dir}/{stem}.rs");
        assert!(
            lines.len() == 1 && lines[0].ends_with(&place),
            "src/recipe.rs: one `{field}.., {place}`, found {lines:?}"
        );
        let ty = lines[0].trim_start()[field.len()..].split(',').next().unwrap();
        let defined_here = |t: &str| {
            t.strip_prefix(&format!("{stem}::")).is_some_and(|name| {
                file.contains(&format!("pub enum {name} "))
                    || file.contains(&format!("pub struct {name} "))
            })
        };
        let fits = match section {
            true => ty == format!("Option<{stem}::Section>"),
            false => VALUE_TYPES.contains(&ty) || defined_here(ty),
        };
        assert!(
            fits,
            "src/recipe.rs: {stem}'s type `{ty}` is not its module's own (or a switch, a number)"
        );
        assert_eq!(count(&cli, &format!("pub mod {stem};")), 1, "harness/src/lib.rs mounts {stem}");
    }
    // The CLI mounts no trainer file beyond the recipe, the step plan and the sections.
    let block = cli.split("pub mod trainer {").nth(1).and_then(|b| b.split("\n}").next()).unwrap();
    let files =
        block.lines().filter(|l| l.trim_start().starts_with("pub mod ") && l.ends_with(';'));
    assert_eq!(files.count(), 2 + modules.len(), "harness/src/lib.rs's trainer files: {block}");
}

//! `records show N`: the recipe as the manifest writes it (comments, inline tables), the
//! official t-test stated as what it tests, and `--lab`: the recipe the trainer runs.
use std::path::Path;
use std::process::{Command, Output};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap()
}

fn records(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_records"))
        .args(args)
        .env("RECORDS_ROOT", repo())
        .output()
        .unwrap()
}

/// The lines of `[recipe]` in records/29.toml, as written.
fn written_recipe(manifest: &str) -> Vec<&str> {
    let lines: Vec<&str> = manifest.lines().collect();
    let start = lines.iter().position(|l| *l == "[recipe]").unwrap();
    let len = lines[start + 1..].iter().position(|l| l.starts_with('[')).unwrap();
    let mut recipe = lines[start..=start + len].to_vec();
    while recipe.last().is_some_and(|l| l.is_empty()) {
        recipe.pop();
    }
    recipe
}

#[test]
fn show_prints_the_recipe_as_written() {
    let out = records(&["show", "29"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let manifest = std::fs::read_to_string(repo().join("records/29.toml")).unwrap();
    let recipe = written_recipe(&manifest);
    assert!(recipe.iter().any(|l| l.contains('#')), "the manifest's recipe has comments");
    assert!(recipe.iter().any(|l| l.contains(" = { ")), "and inline tables");
    assert!(text.contains(&recipe.join("\n")), "{text}");
    // No nested table printed as a top-level section.
    for line in text.lines().filter(|l| l.starts_with('[')) {
        assert!(matches!(line, "[recipe]" | "[lab]"), "{line}");
    }
    assert!(text.contains("\n[lab]\n# The common lab rule"), "{text}");
}

#[test]
fn show_states_the_official_t_test() {
    let out = records(&["show", "29"]);
    let text = String::from_utf8_lossy(&out.stdout);
    // 7 logs: mean 3.2769, t = (3.2769 - 3.28) / (s / sqrt 7) = -8.80 on 6 dof.
    assert!(
        text.contains("one-sided t-test of mean < 3.28: p = 0.0001 (t = −8.80, df = 6)"),
        "{text}"
    );
    assert!(text.contains("official train times:      163.6 s, 163.9 s"), "{text}");
}

#[test]
fn an_upstream_record_without_pr_or_author_is_credited_as_such() {
    let out = records(&["show", "84"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.trim_start().starts_with("#66 ")).expect(&text);
    assert!(line.ends_with("1.595 minutes  no PR"), "{line}");
    assert!(!text.contains(" by \n") && !text.contains("no PR by"), "{text}");
}

/// Builds #29's own trainer (minutes on a CPU the first time), as `replay` does.
#[test]
fn show_lab_prints_the_recipe_the_trainer_runs() {
    let out = records(&["show", "29", "--lab"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# The recipe #29 runs at lab scale"), "{text}");
    // The [lab] rule: 4 layers x d256 over 256-byte rows, 250 steps, #29's windows resampled.
    for line in ["n_layer = 4", "n_embd = 256", "seq_len = 256", "steps = 250", "\"SL-S\""] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// Builds the newest trainer, which prints any record's parameters as its optimizers treat them:
/// #62's attention gates in Adam with upstream #57's gate betas (0.9, 0.99), fp32 moments (#56)
/// and bf16 storage as on GPUs.
#[test]
fn show_params_prints_each_parameters_optimizer_settings() {
    let out = records(&["show", "62", "--params", "--no-plot"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# Each parameter of #62 at full scale"), "{text}");
    assert!(text.contains("adam: lr 0.008 betas 0.65,0.95 eps 1e-10"), "{text}");
    let gate = text.lines().find(|l| l.contains(".attn.gate ")).expect("an attention gate row");
    let cells: Vec<&str> = gate.split_whitespace().collect();
    assert_eq!(cells[1..], ["6x12", "bf16", "adam", "1", "1", "0.9,0.99", "1e-10", "fp32", "-"]);
}

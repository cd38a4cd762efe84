//! `records show N`: the recipe as the manifest writes it (comments, inline tables), the
//! official t-test stated as what it tests, and `--lab`: the recipe the trainer runs; and
//! `show`, `review` and `diff` of an upstream record inside a step, on the real manifests.
mod sandbox;

use std::process::Output;

fn records(args: &[&str]) -> Output {
    sandbox::Sandbox::new().run(args)
}

/// The output of a command that must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = records(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of `[recipe]` and its sections (`[recipe.muon]`) in records/29.toml, as written.
fn written_recipe(manifest: &str) -> Vec<&str> {
    let lines: Vec<&str> = manifest.lines().collect();
    let start = lines.iter().position(|l| *l == "[recipe]").unwrap();
    let other = |l: &&str| l.starts_with('[') && !l.starts_with("[recipe.");
    let len = lines[start + 1..].iter().position(other).unwrap();
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
    let manifest = std::fs::read_to_string(sandbox::checkout().join("records/29.toml")).unwrap();
    let recipe = written_recipe(&manifest);
    assert!(recipe.iter().any(|l| l.contains('#')), "the manifest's recipe has comments");
    assert!(recipe.iter().any(|l| l.contains(" = { ")), "and inline tables");
    assert!(text.contains(&recipe.join("\n")), "{text}");
    assert!(recipe.contains(&"[recipe.muon]"), "and a section");
    // No nested table printed as a top-level one: the sections under [recipe].
    for line in text.lines().filter(|l| l.starts_with('[')) {
        assert!(matches!(line, "[recipe]" | "[lab]") || line.starts_with("[recipe."), "{line}");
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

/// An upstream record's lab recipe comes from its own tree, its commit of the step (#58 is
/// commit 4 of #62's patch), and its budget from the lab rule: 250 x 1,775 / 1,670 = 266.
#[test]
fn show_lab_of_an_upstream_record_asks_its_own_tree() {
    let out = records(&["show", "58", "--lab", "--no-plot"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Upstream record #58: "), "{text}");
    assert!(text.contains("# The recipe #58 runs at lab scale, as its tree resolves it"), "{text}");
    for line in ["steps = 266", "interleaved = true", "n_layer = 4"] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(!text.contains("bigram_hash"), "#62's key is not yet in #58's tree: {text}");
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

/// An upstream record inside a step: its facts and logs, the patch that holds it, and the keys
/// its row set with their values before and after; a same-math row says why.
#[test]
fn show_of_an_upstream_record_prints_what_it_set() {
    let text = stdout_of(&["show", "58"]);
    assert!(text.starts_with("Upstream record #58: "), "{text}");
    assert!(text.contains("commit 4 of record #62's step (patches/62.patch)"), "{text}");
    assert!(
        text.contains("`records replay 58` runs its tree and recipe, `records walk 54 62`"),
        "{text}"
    );
    assert!(text.contains("lab budget    266 steps"), "{text}");
    let line = |key: &str| {
        let mut changes = text.lines().filter(|l| l.contains(" -> "));
        changes.find(|l| l.trim_start().starts_with(key)).unwrap_or("")
    };
    assert!(line("attn_layers").ends_with("\"SSSLSS-SSSL\" -> \"PSPLSP-SSPL\""), "{text}");
    assert!(line("steps").ends_with("1840 -> 1775"), "{text}");
    let out = records(&["show", "59"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("recipe: unchanged (same math: "));
}

/// `records review K` for an upstream record inside a step: its facts, then its one commit of
/// the holding record's patch (the notes in it), not the others.
#[test]
fn review_of_an_upstream_record_is_its_one_commit() {
    let text = stdout_of(&["review", "58"]);
    assert!(text.starts_with("Upstream #58: "), "{text}");
    assert!(text.contains("commit 4 of 8 in record #62's patch"), "{text}");
    let commits: Vec<&str> = text.lines().filter(|l| l.starts_with("Commit ")).collect();
    assert_eq!(commits.len(), 1, "{commits:?}");
    assert!(commits[0].starts_with("Commit 4/8: #58: "), "{commits:?}");
}

/// `records diff A B` with an upstream record: the upstream records between with the keys each
/// set, the recipe diff of the two recipes, and the code diff of their trees; a number in no
/// row is named.
#[test]
fn diff_with_an_upstream_record_lists_the_steps_between() {
    let text = stdout_of(&["diff", "58", "54"]);
    assert!(text.starts_with("records diff #54 → #58"), "{text}");
    let steps: Vec<&str> =
        text.lines().filter(|l| l.starts_with("  #5") && l.contains("  (+")).collect();
    assert_eq!(steps.len(), 4, "#55-#58: {steps:?}");
    assert!(steps[0].starts_with("  #55 ") && steps[3].starts_with("  #58 "), "{steps:?}");
    assert!(text.contains("  ~ attn_layers: \"SSSLSS-SSSL\" → \"PSPLSP-SSPL\"\n"), "{text}");
    assert!(text.contains("  + value_gate = { channels = 12 }\n"), "{text}");
    // One code diff of #54's tree and #58's (its commit of #62's patch): #58's interleaved
    // rotary is in it, #62's bigram hash (a later commit) is not.
    let code = &text[text.find("Code #54 → #58 (the two trees").expect("a code diff")..];
    assert!(code.contains("diff --git"), "{code}");
    assert!(code.contains("interleaved"), "{code}");
    assert!(!code.contains("src/model/bigram_hash.rs"), "{code}");
    // The facts side by side, as for two records: #58's from its row (its 5 logs), #54's from
    // its manifest; no token row, as upstream's table gives no token count for #58.
    let facts = &text[..text.find("Upstream records from").unwrap()];
    for row in ["official time (8xH100)", "1.940 minutes (116.4 s)", "1.820 minutes (109.2 s)"] {
        assert!(facts.contains(row), "{row}: {facts}");
    }
    assert!(
        facts.contains(" steps ") && facts.contains("1880") && facts.contains("1775"),
        "{facts}"
    );
    assert!(facts.contains("official mean val loss") && facts.contains("(5 logs)"), "{facts}");
    assert!(!facts.contains("tokens"), "{facts}");
    let out = records(&["diff", "81", "84"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("unknown record 81"), "{err}");
    assert!(err.contains("upstream records inside their steps: `records list --all`"), "{err}");
}

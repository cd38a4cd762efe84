//! `records diff` and `records review` on the three-record fixture, through the real binary.
mod series_fixture;

use series_fixture::{stderr, stdout, Fixture};

fn run_ok(f: &Fixture, args: &[&str]) -> String {
    let out = f.records(args);
    assert!(out.status.success(), "records {args:?}: {}", stderr(&out));
    let text = stdout(&out);
    assert!(!text.contains('\x1b'), "no colour when stdout is not a terminal");
    text
}

#[test]
fn diff_forward_shows_commits_recipe_and_code() {
    let f = Fixture::new();
    let text = run_ok(&f, &["diff", "1", "29"]);
    assert!(text.contains("Commits from #1 to #29"), "{text}");
    assert!(text.contains("#29  Record 29 title  (2 commit(s), +"), "{text}");
    assert!(text.contains("1/2 Add value embeddings  +"), "{text}");
    assert!(text.contains("2/2 Raise the learning rate to 0.2  +1 -1"), "{text}");
    // Grouped by the manifest's section comments, in its order, each with its line's comment.
    assert!(
        text.contains(
            "  Optimizer\n    ~ lr: 0.1 → 0.2   # step size\n  Model\n    ~ zero_proj: false → true\n"
        ),
        "{text}"
    );
    assert!(!text.contains("lab.steps"), "unchanged keys are not listed");
    assert!(
        text.contains(
            "--- /dev/null\n+++ b/src/value_embed.rs\n@@ -0,0 +1,4 @@\n+/// Value embeddings"
        ),
        "{text}"
    );
    assert!(text.contains("+    let h = h + crate::value_embed::value_embed(x);\n"), "{text}");
    assert!(text.contains("-pub const LR: f32 = 0.1;\n+pub const LR: f32 = 0.2;\n"), "{text}");
}

#[test]
fn diff_backward_lists_commits_as_undone() {
    let f = Fixture::new();
    let text = run_ok(&f, &["diff", "38", "1"]);
    assert!(text.contains("Commits undone from #38 back to #1 (newest first)"), "{text}");
    let p38 = text.find("#38  Record 38 title").unwrap();
    let p29 = text.find("#29  Record 29 title").unwrap();
    assert!(p38 < p29, "newest first: {text}");
    let c2 = text.find("2/2 Raise the learning rate").unwrap();
    let c1 = text.find("1/2 Add value embeddings").unwrap();
    assert!(c2 < c1, "{text}");
    assert!(text.contains("~ lr: 0.2 → 0.1"), "{text}");
    assert!(text.contains("--- a/src/value_embed.rs\n+++ /dev/null\n"), "{text}");
    assert!(
        text.contains("--- /dev/null\n+++ b/src/old.rs\n"),
        "the file #38 deleted comes back: {text}"
    );

    let back = run_ok(&f, &["diff", "29", "1", "--code"]);
    assert!(back.contains("-    let h = h + crate::value_embed::value_embed(x);\n"), "{back}");
}

#[test]
fn diff_parts_are_selected_by_flags() {
    let f = Fixture::new();
    let stat = run_ok(&f, &["diff", "1", "38", "--stat"]);
    assert!(
        stat.contains("Commits from #1 to #38") && stat.contains("#38  Record 38 title"),
        "{stat}"
    );
    assert!(stat.contains("src/old.rs") && stat.contains("file(s) changed"), "{stat}");
    assert!(!stat.contains("Recipe #1") && !stat.contains("Code #1"), "{stat}");

    let recipe = run_ok(&f, &["diff", "1", "29", "--recipe"]);
    assert!(recipe.contains("Recipe #1 → #29") && recipe.contains("~ lr: 0.1 → 0.2"), "{recipe}");
    assert!(!recipe.contains("Commits from") && !recipe.contains("Code #1"), "{recipe}");

    let code = run_ok(&f, &["diff", "1", "29", "--code"]);
    assert!(code.contains("Code #1 → #29") && code.contains("+++ b/src/value_embed.rs"), "{code}");
    assert!(!code.contains("Commits from") && !code.contains("Recipe #1"), "{code}");

    let out = f.records(&["diff", "1", "99"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown record 99; known records: 1, 29, 38"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn review_text_reads_like_a_pull_request() {
    let f = Fixture::new();
    let text = run_ok(&f, &["review", "29"]);
    assert!(text.starts_with("Record #29: Record 29 title\n"), "{text}");
    // The fixture has no hardware/: the review still reads, and says why nothing is predicted.
    assert!(text.contains("Predicted step: not predicted: reading "), "{text}");
    assert!(
        text.contains(
            "PR:             #129 https://github.com/KellerJordan/modded-nanogpt/pull/129"
        ),
        "{text}"
    );
    assert!(text.contains("Authors:        @author29, @coauthor"), "{text}");
    assert!(
        text.contains("Official time:  2.83 minutes (170.0 s), −10.0 s (−5.6%) vs #1 (180.0 s)"),
        "{text}"
    );
    assert!(
        text.contains("Claim\n─────\n\nClaim of record 29: it is faster because of a reason."),
        "{text}"
    );
    assert!(text.contains("Commit 1/2: Add value embeddings"), "{text}");
    // Commits are credited to the upstream record and its authors, never to the port's
    // committer.
    assert!(
        text.contains("\n  record #29 · upstream PR #129 by @author29, @coauthor, 2025-03-01 · +"),
        "{text}"
    );
    assert!(!text.contains("Ada Lovelace") && !text.contains("ada@example.org"), "{text}");
    assert!(text.contains("    A second embedding table whose output"), "{text}");
    assert!(text.contains("src/value_embed.rs (new file)  +4 -0"), "{text}");
    // The note follows the line it is anchored at (line 8 of src/model.rs).
    let anchored = "      8 +    let h = h + crate::value_embed::value_embed(x);\n        ▸ note: The value embedding joins";
    assert!(text.contains(anchored), "{text}");
    // A note on an unchanged line is listed with the line it points at.
    assert!(text.contains("Notes outside the hunks"), "{text}");
    assert!(
        text.contains(
            "src/model.rs:2  pub struct Gpt {\n        ▸ note: Unchanged line, outside every hunk."
        ),
        "{text}"
    );
    assert!(
        text.contains("val loss: mean 3.2778 ± 0.0007 over 3 runs: [3.2771, 3.2785, 3.2779]"),
        "{text}"
    );
    assert!(
        text.contains("one-sided t-test of mean < 3.28: p = 0.0166 (t = −5.34, df = 2)"),
        "{text}"
    );
    assert!(!text.contains("that the mean is not below"), "{text}");
    assert!(text.contains("val curve (step:loss): 0:10.8000 50:4.5000 100:3.2700"), "{text}");
    assert!(text.contains("no replay results yet; run `records replay 29`"), "{text}");

    // This machine's replays appear once they exist.
    let log = records::verdict::runlog::parse(
        "step:100/100 val_loss:3.2791 train_time:12500ms step_avg:125.00ms\n",
    );
    let verdict = records::verdict::Verdict::new(&[log], 3.28, 150.0, 100).unwrap().at_lab_scale();
    f.write("results/29/2026-01-01-run1/verdict.json", &serde_json::to_string(&verdict).unwrap());
    let text = run_ok(&f, &["review", "29"]);
    assert!(
        text.contains("2026-01-01-run1: lab scale, 1 run, reached target 3.28 in 100 steps; val loss [3.2791], mean train time 12.5 s"),
        "{text}"
    );
    assert!(!text.contains("no replay results yet"));
}

#[test]
fn review_markdown_and_the_base_record() {
    let f = Fixture::new();
    let md = run_ok(&f, &["review", "29", "--format", "md"]);
    assert!(md.starts_with("# Record #29: Record 29 title\n\n- **PR:** #129"), "{md}");
    assert!(md.contains("## Claim\n\nClaim of record 29"), "{md}");
    assert!(md.contains("### 1/2 Add value embeddings\n\n*record #29 · upstream PR #129 by @author29, @coauthor, 2025-03-01*"), "{md}");
    assert!(md.contains("#### `src/model.rs` (+1 −0)\n\n```diff\n@@ "), "{md}");
    assert!(md.contains("+    let h = h + crate::value_embed::value_embed(x);\n```\n\n> **Note** (`src/model.rs:8`): The value embedding joins"), "{md}");
    assert!(
        md.contains(
            "## Evidence\n\n### Official logs (upstream hardware)\n\n- val loss: mean 3.2778"
        ),
        "{md}"
    );
    assert_eq!(
        md.matches("```diff").count(),
        md.matches("\n```\n").count(),
        "fences balance: {md}"
    );

    let base = run_ok(&f, &["review", "1"]);
    assert!(base.contains("Record #1 is the base of the series: it has no patch."), "{base}");
    assert!(!base.contains(" vs #"), "#1 has no parent: {base}");

    let text = run_ok(&f, &["review", "38"]);
    assert!(text.contains("src/old.rs (deleted)  +0 -1"), "{text}");
    assert!(text.contains("-pub fn unused() {}"), "{text}");
}

/// The facts come first, side by side with the change; our lab rows appear only once a record
/// has been replayed here.
#[test]
fn diff_puts_the_facts_side_by_side() {
    let f = Fixture::new();
    let text = run_ok(&f, &["diff", "1", "29", "--recipe"]);
    let row = text.lines().find(|l| l.contains("official time (8xH100)")).expect(&text);
    assert!(row.contains("(180.0 s)") && row.contains("(170.0 s)"), "{row}");
    assert!(row.contains("−10.0 s (−5.6%)"), "{row}");
    assert!(text.lines().any(|l| l.contains("official mean val loss")), "{text}");
    assert!(!text.contains("ours, lab"), "nothing replayed in the fixture: {text}");

    // Both replayed: the lab rows come from each record's replay over its whole lab budget,
    // not from a newer `--steps` smoke run.
    let verdict = |line: &str, steps| {
        let log = records::verdict::runlog::parse(&format!("{line}\n"));
        let v = records::verdict::Verdict::new(&[log], 3.28, 150.0, steps).unwrap();
        serde_json::to_string(&v.at_lab_scale()).unwrap()
    };
    let whole = verdict("step:100/100 val_loss:3.2791 train_time:12500ms step_avg:125.00ms", 100);
    let smoke = verdict("step:10/10 val_loss:4.9000 train_time:1250ms step_avg:125.00ms", 10);
    f.write("results/01/2026-01-01-run1-lab/verdict.json", &whole);
    f.write("results/29/2026-01-01-run1-lab/verdict.json", &whole);
    f.write("results/29/2026-01-02-run2-lab/verdict.json", &smoke);
    let text = run_ok(&f, &["diff", "1", "29", "--recipe"]);
    let row = text.lines().find(|l| l.contains("ours, lab: train time")).expect(&text);
    assert!(row.contains("12.5 s / 100 steps   ") && !row.contains("/ 10 steps"), "{row}");
}

#[test]
fn diff_of_a_record_with_itself_is_refused() {
    let f = Fixture::new();
    let out = f.records(&["diff", "29", "29"]);
    assert!(!out.status.success() && stdout(&out).is_empty());
    assert!(stderr(&out).contains("the same record on both sides"), "{}", stderr(&out));
}

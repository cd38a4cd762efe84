//! `records list`, `show` and the errors for unknown records and malformed manifests, through the
//! real binary on a temp repo root that holds a copy of the real manifests.
mod sandbox;

use sandbox::{checkout, Sandbox};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A temp root with `Cargo.toml` and a copy of the real `records/`, and a sandbox for its runs.
struct Root {
    dir: tempfile::TempDir,
    sandbox: Sandbox,
}

impl Root {
    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn results(&self) -> PathBuf {
        self.sandbox.results()
    }
}

fn root_with_real_manifests() -> Root {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("Cargo.toml"), "[workspace]\n").unwrap();
    std::fs::create_dir(root.path().join("records")).unwrap();
    for entry in std::fs::read_dir(checkout().join("records")).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, root.path().join("records").join(p.file_name().unwrap())).unwrap();
    }
    Root { dir: root, sandbox: Sandbox::new() }
}

fn records(root: &Root, args: &[&str]) -> Output {
    root.sandbox.records_at(root.path()).args(args).output().unwrap()
}

#[test]
fn list_and_show_read_the_manifests() {
    let root = root_with_real_manifests();
    let out = records(&root, &["list"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("45 minutes") && text.contains("19560"), "{text}");
    let row = |text: &str, n: &str| text.lines().find(|l| l.starts_with(n)).unwrap().to_string();
    assert!(row(&text, " 29").contains("not replayed"), "{text}");

    // A lab replay here shows its verdict on the record's row.
    let log = records::verdict::runlog::parse("step:250/250 val_loss:1.8096 train_time:207000ms\n");
    let v = records::verdict::Verdict::new(&[log], 1.8096, 163.9, 250).unwrap().at_lab_scale();
    let dir = root.results().join("29/20261201-000000-1-lab");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("verdict.json"), serde_json::to_string(&v).unwrap()).unwrap();
    let text = String::from_utf8_lossy(&records(&root, &["list"]).stdout).to_string();
    assert!(row(&text, " 29").contains("1.8096 reached 1.8096"), "{text}");
    // A newer shortened run (`--steps 5`) is not the record's result; alone, it says so.
    let smoke = |n: &str| {
        let log = records::verdict::runlog::parse("step:5/5 val_loss:3.5186 train_time:9000ms\n");
        let v = records::verdict::Verdict::new(&[log], 1.8096, 163.9, 5).unwrap().at_lab_scale();
        let dir = root.results().join(format!("{n}/20261202-000000-2-lab"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("verdict.json"), serde_json::to_string(&v).unwrap()).unwrap();
    };
    smoke("29");
    smoke("54");
    let text = String::from_utf8_lossy(&records(&root, &["list"]).stdout).to_string();
    assert!(row(&text, " 29").contains("1.8096 reached 1.8096"), "{text}");
    assert!(row(&text, " 54").contains("shortened: 5 of 281 steps"), "{text}");
    assert!(!text.contains("3.5186"), "{text}");
    let out = records(&root, &["show", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("llm.c") && text.contains("3.2722"), "{text}");
}

#[test]
fn unknown_record_lists_the_known_ones() {
    let root = root_with_real_manifests();
    let out = records(&root, &["replay", "99"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
    assert!(err.contains("unknown record 99") && err.contains("known records: 1"), "{err}");
}

#[test]
fn malformed_manifest_names_file_and_line() {
    let root = root_with_real_manifests();
    let path = root.path().join("records/01.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace("steps = 19560", "steps = 19560 x");
    let line = text.lines().position(|l| l.starts_with("steps = 19560 x")).unwrap() + 1;
    std::fs::write(&path, text).unwrap();
    // `list` shows the other records and warns; a command that needs #1 fails.
    for (cmd, ok) in [(&["list"][..], true), (&["replay", "1"], false)] {
        let out = records(&root, cmd);
        assert_eq!(out.status.success(), ok, "{cmd:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("records/01.toml") && err.contains(&format!("line {line}")), "{err}");
    }
}

/// A key given twice is named at the second one's line, quoted; a table given twice at its
/// second header, with the line of the first.
#[test]
fn a_duplicate_key_or_table_is_named_at_its_own_line() {
    let root = root_with_real_manifests();
    let path = root.path().join("records/54.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let title = lines.iter().position(|l| l.starts_with("title = ")).unwrap();
    let header = lines.iter().position(|l| *l == "[record]").unwrap();
    let with = |at: usize, extra: &[&str]| {
        let mut v = lines.clone();
        v.splice(at..at, extra.iter().copied());
        v.join("\n")
    };
    let cases = [
        // `pr = 1` right after the title: the duplicate is the manifest's own `pr`, below it.
        (with(title + 1, &["pr = 1"]), title + 3, "at `pr = 181`".to_string()),
        (
            with(header, &["[record]", "number = 54", ""]),
            header + 4,
            format!("at `[record]`, first on line {}", header + 1),
        ),
    ];
    for (text, line, quoted) in cases {
        std::fs::write(&path, text).unwrap();
        let out = records(&root, &["show", "54"]);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("records/54.toml: line {line}: duplicate key {quoted}");
        assert!(!out.status.success() && err.contains(&want), "want {want:?} in {err}");
    }
}

#[test]
fn manifest_with_an_unknown_field_is_rejected() {
    let root = root_with_real_manifests();
    let path = root.path().join("records/01.toml");
    let text = std::fs::read_to_string(&path).unwrap().replace("hardware = ", "hardwear = ");
    std::fs::write(&path, text).unwrap();
    let out = records(&root, &["show", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("hardwear"), "{err}");
}

/// The lab rule: a modern record's lab budget is its official steps x 250/1,670 (rounded), and
/// a manifest that says otherwise is refused by name; #1 keeps its own.
#[test]
fn lab_budgets_follow_the_official_steps() {
    use records::catalog::lab_steps_rule;
    let budgets: Vec<(u32, u64)> = [(38, 1670), (46, 2160), (53, 1920), (54, 1880), (62, 1600)]
        .into_iter()
        .chain([(63, 1575), (84, 1485)])
        .map(|(n, steps)| (n, lab_steps_rule(n, steps).unwrap()))
        .collect();
    let want = [(38, 250), (46, 323), (53, 287), (54, 281), (62, 240), (63, 236), (84, 222)];
    assert_eq!(budgets, want, "the issue's table");
    assert_eq!(lab_steps_rule(1, 19560), None, "#1 sets its own");
    let root = root_with_real_manifests();
    let path = root.path().join("records/38.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let lab = text.find("\n[lab]\n").unwrap();
    let bad = format!("{}{}", &text[..lab], text[lab..].replacen("steps = 250", "steps = 300", 1));
    std::fs::write(&path, bad).unwrap();
    let err = String::from_utf8_lossy(&records(&root, &["show", "38"]).stderr).to_string();
    assert!(err.contains("38.toml: [lab] steps = 300, but the lab rule gives 250"), "{err}");
}

/// #1 is judged against its own lab target, every later record against #29's.
#[test]
fn each_era_has_its_lab_target() {
    let catalog = records::catalog::Catalog::load(&checkout()).unwrap();
    let (t1, from1) = catalog.lab_target_of(1).unwrap();
    let (t38, from38) = catalog.lab_target_of(38).unwrap();
    assert_eq!(
        (from1, from38, catalog.lab_target_of(29).unwrap().1),
        (1.into(), 29.into(), 29.into())
    );
    assert!(t38.val_loss < t1.val_loss, "{} vs {}", t38.val_loss, t1.val_loss);
}

/// #38's manifest lists the nine upstream records of its span; `show` prints a line for each
/// and `review` credits each commit to its own upstream record.
#[test]
fn the_upstream_records_of_a_span_are_listed_and_credited() {
    let root = root_with_real_manifests();
    let text = String::from_utf8_lossy(&records(&root, &["show", "38"]).stdout).to_string();
    assert!(text.contains("#30  2025-09-05  2.717 minutes  PR #120 by @EmelyanenkoK"), "{text}");
    assert!(text.contains("#38  2025-09-29  2.476 minutes  PR #134 by @varunneal"), "{text}");
    let review = Sandbox::new().run(&["review", "38", "--no-pager"]);
    let text = String::from_utf8_lossy(&review.stdout);
    assert!(text.contains("upstream #34 · PR #130 by @classiclarryd, 2025-09-18"), "{text}");
    assert_eq!(text.matches("\n  upstream #").count(), 9, "one credit per commit");
}

/// `list --all`: every upstream record of the series once, oldest first, with the step count of
/// its linked log and its logs' evidence from the manifest (no fetch), and the patch holding it.
#[test]
fn list_all_shows_every_upstream_record_with_its_logs_evidence() {
    let root = root_with_real_manifests();
    let out = records(&root, &["list", "--all"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let rows: Vec<&str> = text.lines().skip_while(|l| !l.contains("its logs")).skip(1).collect();
    let numbers: Vec<u32> =
        rows.iter().map(|l| l.split_whitespace().next().unwrap().parse().unwrap()).collect();
    let want: Vec<u32> = (30..=84).filter(|n| !(81..=83).contains(n)).collect();
    assert_eq!(numbers, want, "{text}");
    let row = |n: &str| *rows.iter().find(|l| l.trim_start().starts_with(n)).unwrap();
    // #38: 7 logs of 1,670 steps, mean 3.2790 (records/38.toml's evidence, the same logs).
    assert!(row("38 ").contains("1670  3.2790 (p = ") && row("38 ").contains("7 logs"), "{text}");
    assert!(row("38 ").contains("#38"), "{text}");
    assert!(row("66 ").contains("no log") && row("66 ").contains("#84"), "{text}");
    assert!(row("69 ").contains("(1 log)"), "{text}");
}

/// A replay whose metrics.jsonl was cut (a full disk, a copy stopped early) is named in a
/// warning and left out; every other record and command still reads (the site: site.rs). A cut
/// lab-targets.json says what to do.
#[test]
fn a_cut_metrics_file_is_named_and_left_out() {
    let root = root_with_real_manifests();
    let log = records::verdict::runlog::parse("step:250/250 val_loss:1.8096 train_time:207000ms\n");
    let v = records::verdict::Verdict::new(&[log], 1.8096, 163.9, 250).unwrap().at_lab_scale();
    let dir = root.results().join("29/20261201-000000-1-lab");
    std::fs::create_dir_all(dir.join("run-1")).unwrap();
    std::fs::write(dir.join("verdict.json"), serde_json::to_string(&v).unwrap()).unwrap();
    let cut = "{\"type\":\"val\",\"step\":0,\"val_loss\":5.7}\n{\"type\":\"val\",\"st";
    std::fs::write(dir.join("run-1/metrics.jsonl"), cut).unwrap();
    for args in [&["list"][..], &["list", "--all"]] {
        let out = records(&root, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(err.contains("run-1/metrics.jsonl: line 2"), "{args:?}: {err}");
        assert!(err.contains("replay 20261201-000000-1-lab is damaged"), "{args:?}: {err}");
    }
    let out = records(&root, &["show", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&records(&root, &["list"]).stdout).to_string();
    let row = text.lines().find(|l| l.starts_with(" 29")).unwrap();
    assert!(row.contains("1.8096 reached"), "the verdict still reads: {text}");

    std::fs::write(root.results().join("lab-targets.json"), "{\"targets\": [").unwrap();
    let out = records(&root, &["replay", "29"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("lab-targets.json does not read") && err.contains("delete it"), "{err}");
}

/// A time curve that goes back in time (a mistyped log line) is refused, naming the points.
#[test]
fn a_time_curve_must_rise() {
    let root = root_with_real_manifests();
    let path = root.path().join("records/84.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("[500, 15.947], [750, 29.867]"), "#84's curve log as written");
    std::fs::write(&path, text.replacen("[750, 29.867]", "[750, 12.0]", 1)).unwrap();
    let err = String::from_utf8_lossy(&records(&root, &["show", "84"]).stderr).to_string();
    let want = "84.toml: evidence.time_curve must rise in step and not fall in time: [500, 15.947] then [750, 12]";
    assert!(err.contains(want), "{err}");
}

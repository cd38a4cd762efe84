//! A second track of records: Act 1's steps (`records/aN.toml`, `patches/aN.patch`) branch from
//! #1's tree and apply forward. On the fixture (#1 -> #29 -> #38, and a1 -> a2 on #1): ids
//! parse, an Act 1 tree is #1's tree with the steps' patches applied and has its recorded id, a
//! manifest with a wrong parent, lab budget, file name or tree is refused by name, `list` and
//! the site group by track, `diff` and `review` reach across tracks, and a shared file an Act 1
//! patch changes must be HEAD's unless the manifest says why not.
mod series_fixture;

use records::catalog::{Catalog, RecordId, Track};
use records::series::{self, Series};
use series_fixture::{stderr, stdout, Fixture};

fn id(s: &str) -> RecordId {
    s.parse().unwrap()
}

/// Replaces the one occurrence of `old` in the fixture's file `path` with `new`.
fn edit(f: &Fixture, path: &str, old: &str, new: &str) {
    let text = f.read(path);
    assert_eq!(text.matches(old).count(), 1, "{old:?} in {path}");
    f.write(path, &text.replacen(old, new, 1));
}

#[test]
fn ids_parse_as_typed_and_bad_ones_are_explained() {
    let f = Fixture::with_act1();
    for (arg, want) in [("a1", "Record a1: Step a1 title"), ("A1", "Record a1: Step a1 title")] {
        let out = f.records(&["show", arg, "--no-plot"]);
        assert!(out.status.success(), "{arg}: {}", stderr(&out));
        assert!(stdout(&out).starts_with(want), "{arg}: {}", stdout(&out));
        assert!(stdout(&out).contains("  parent        #1\n"), "{}", stdout(&out));
    }
    for arg in ["29", "#29"] {
        let out = f.records(&["show", arg, "--no-plot"]);
        assert!(stdout(&out).starts_with("Record #29: Record 29 title"), "{}", stdout(&out));
    }
    let out = f.records(&["show", "x3"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("`x3` is not a record"), "{}", stderr(&out));
    assert!(stderr(&out).contains("a3 for Act 1"), "{}", stderr(&out));
    let out = f.records(&["show", "a9"]);
    assert!(
        stderr(&out).contains("unknown record a9; known records: 1, 29, 38, a1, a2"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_act1_tree_is_1s_tree_with_the_steps_patches_applied() {
    let f = Fixture::with_act1();
    let series = Series::load(f.root()).unwrap();
    let chain: Vec<RecordId> = series.chain(Track::Act1).iter().map(|r| r.number).collect();
    assert_eq!(chain, [id("a1"), id("a2")]);
    assert_eq!(series.chain(Track::Main).len(), 3);
    assert_eq!(series.parent(id("a1")).unwrap(), Some(RecordId::main(1)));
    assert_eq!(series.parent(id("a2")).unwrap(), Some(id("a1")));
    assert_eq!(series.lineage(id("a2")).unwrap(), [RecordId::main(1), id("a1"), id("a2")]);

    // a1 = #1's files with one line of the model changed; a2 = a1's and a file of its own.
    let mut want = f.trees[&1].clone();
    let model = want["src/model.rs"].replace("x * 2.0\n", series_fixture::MODEL_A1);
    assert_ne!(model, want["src/model.rs"]);
    want.insert("src/model.rs".into(), model);
    let dir = series::materialize(f.root(), id("a1")).unwrap();
    assert_eq!(dir, f.root().join("target/records/trees/a1"));
    let mut got = series_fixture::read_files(&dir, &[]);
    let marker = got.remove(series::tree::MARKER).unwrap();
    assert_eq!(got, want, "a1 = #1 + a1.patch");
    let recorded = Catalog::load(f.root()).unwrap().get(id("a1")).unwrap().record.tree.clone();
    assert_eq!(Some(marker.trim().to_string()), recorded, "a1's recorded tree id");

    want.insert("src/optim/warmdown.rs".into(), series_fixture::A2_OWN.into());
    let out_dir = tempfile::tempdir().unwrap();
    let out = f.records(&["series", "tree", "a2", "--out", out_dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut got = series_fixture::read_files(out_dir.path(), &[]);
    got.remove(series::tree::MARKER);
    got.remove("harness/Cargo.toml"); // none in the fixture's workspace; kept general
    assert_eq!(got, want, "a2 = #1 + a1.patch + a2.patch");
    // The checkout itself is the newest main record's trainer, untouched.
    assert_eq!(f.trainer_files(), f.trees[&38]);

    let out = f.records(&["series", "check"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("ok   #38 ") && text.contains("ok   a1   1 commit(s), +1 -1"), "{text}");
    assert!(text.contains("ok   a2   1 commit(s), +4 -0"), "{text}");
    assert!(text.contains("HEAD's shared files reused (0 listed as differing)"), "{text}");
    assert!(text.contains("series ok: 5 record(s)"), "{text}");
}

#[test]
fn a_wrong_recorded_tree_of_a1_is_refused_naming_a1_toml() {
    let f = Fixture::with_act1();
    let tree = Catalog::load(f.root()).unwrap().get(id("a1")).unwrap().record.tree.clone();
    let tree = tree.expect("recorded by the fixture");
    edit(&f, "records/a1.toml", &tree, &"0".repeat(40));
    for args in [&["series", "check"][..], &["series", "tree", "a2"], &["diff", "1", "a1"]] {
        let out = f.records(args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(err.contains("records/a1.toml: record.tree = 0000000000"), "{args:?}: {err}");
        assert!(
            err.contains("applying patches/a1.patch to #1's tree gives a1 the tree")
                && err.contains(&tree)
                && err.contains("records series record-trees --track act1"),
            "{args:?}: {err}"
        );
    }
    assert!(!f.root().join("target/records/trees/a2").exists());
    // The main records' trees are unaffected.
    let out = f.records(&["series", "tree", "29"]);
    assert!(out.status.success(), "{}", stderr(&out));

    // A changed line of a1.patch applies, but gives a1 (and a2) another trainer.
    let good = f.read("records/a1.toml").replace(&"0".repeat(40), &tree);
    f.write("records/a1.toml", &good);
    edit(&f, "patches/a1.patch", "+    x * 3.0\n", "+    x * 4.0\n");
    let err = stderr(&f.records(&["series", "tree", "a2"]));
    assert!(err.contains("records/a1.toml: record.tree = "), "{err}");
    assert!(err.contains("patches/a1.patch changed since the trees were recorded"), "{err}");
}

#[test]
fn an_act1_manifest_with_a_wrong_parent_budget_or_name_is_refused_by_name() {
    let cases: [(&str, &str, &str, &str); 5] = [
        (
            "records/a2.toml",
            "parent = \"a1\"",
            "parent = \"#1\"",
            "records/a2.toml: record.parent = #1 but the parent of a2 is a1 (parent = \"a1\")",
        ),
        (
            "records/a1.toml",
            "parent = \"#1\"",
            "parent = 29",
            "records/a1.toml: record.parent = #29 but the parent of a1 is #1 (parent = 1)",
        ),
        (
            "records/a2.toml",
            "\nsteps = 125\n",
            "\nsteps = 200\n",
            "records/a2.toml: [lab] steps = 200, but the lab rule gives 125: 250 x 12288 official \
             steps / 24576 (a1), rounded",
        ),
        (
            "records/a2.toml",
            "track = \"act1\"\n",
            "",
            "records/a2.toml: record.number = 2 but the file is named a2.toml; a2.toml is a record \
             of Act 1: set track = \"act1\" in [record]",
        ),
        (
            "records/a2.toml",
            "number = 2\n",
            "number = 7\n",
            "records/a2.toml: record.number = 7 on track act1 is a7, whose manifest is a7.toml, but \
             the file is named a2.toml",
        ),
    ];
    for (path, old, new, want) in cases {
        let f = Fixture::with_act1();
        edit(&f, path, old, new);
        let stem = path.trim_start_matches("records/").trim_end_matches(".toml");
        let out = f.records(&["show", stem]);
        assert!(!out.status.success(), "{new}: {}", stdout(&out));
        let err = stderr(&out);
        let err = err.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(err.contains(want), "{new}:\n{err}\nwants\n{want}");
    }
    // A step the track does not hold, and a gap in the chain.
    let f = Fixture::with_act1();
    std::fs::rename(f.root().join("records/a2.toml"), f.root().join("records/a7.toml")).unwrap();
    edit(&f, "records/a7.toml", "number = 2\n", "number = 7\n");
    let err = stderr(&f.records(&["show", "a7"]));
    assert!(err.contains("a7 is not a record of Act 1 (its records are a1, a2, a3"), "{err}");
    let f = Fixture::with_act1();
    std::fs::rename(f.root().join("records/a2.toml"), f.root().join("records/a3.toml")).unwrap();
    std::fs::rename(f.root().join("patches/a2.patch"), f.root().join("patches/a3.patch")).unwrap();
    edit(&f, "records/a3.toml", "number = 2\n", "number = 3\n");
    edit(&f, "records/a3.toml", "parent = \"a1\"", "parent = \"a2\"");
    let out = f.records(&["series", "check"]);
    let err = stderr(&out);
    assert!(
        err.contains(
            "records/a3.toml: record.parent = Some(a2) but the chain puts Some(a1) before a3"
        ),
        "{err}"
    );
}

/// A step whose patch is missing (written after its manifest) stops its own track there; the
/// main track and the steps before it stay usable, and `series check` names it.
#[test]
fn a_missing_act1_patch_breaks_only_its_own_track_from_there() {
    let f = Fixture::with_act1();
    std::fs::remove_file(f.root().join("patches/a2.patch")).unwrap();
    for args in [&["series", "tree", "29"][..], &["series", "tree", "a1"], &["diff", "1", "a1"]] {
        let out = f.records(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    for args in [&["series", "tree", "a2"][..], &["series", "check"], &["review", "a2"]] {
        let out = f.records(args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("record a2 has no patch: ") && err.contains("patches/a2.patch is missing"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn list_groups_the_records_by_track() {
    let f = Fixture::with_act1();
    let out = f.records(&["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    let at = |p: &dyn Fn(&str) -> bool| {
        lines.iter().position(|l| p(l)).unwrap_or_else(|| panic!("{text}"))
    };
    let main = at(&|l| l == "The world records on 8×H100");
    let act1 = at(&|l| l == "Act 1: Tyler Romero's 2×RTX 4090 steps from the llm.c baseline");
    let row = |n: &'static str| at(&move |l: &str| l.starts_with(n));
    assert_eq!(main, 0, "{text}");
    assert!(main < row("  1 ") && row("  1 ") < row(" 29 ") && row(" 38 ") < act1, "{text}");
    assert!(act1 < row(" a1 ") && row(" a1 ") < row(" a2 "), "{text}");
    assert!(lines[row(" a2 ")].contains("Step a2 title"), "{text}");
    assert!(lines[act1 + 1].contains("official (2xRTX4090)"), "{text}");
    assert!(text.contains("not yet in the lab: a3, a4, a5, a6"), "{text}");
    // Without Act 1's manifests there is no Act 1 section.
    let plain = Fixture::new();
    let text = stdout(&plain.records(&["list"]));
    assert!(!text.contains("Act 1") && text.contains(" 38 "), "{text}");
}

#[test]
fn a_shared_file_that_differs_from_heads_is_refused_unless_the_manifest_lists_it() {
    const SHARED: &str =
        "/// At HEAD only.\npub fn step(w: f32, g: f32, lr: f32) -> f32 {\n    w - lr * g\n}\n";
    let f = Fixture::with_act1();
    // HEAD gains a technique by head.patch (no record made it, so no main tree has it), and
    // a2 brings it to Act 1 changed on its way.
    let newest = tempfile::tempdir().unwrap();
    series::materialize_into(f.root(), id("38"), newest.path()).unwrap();
    let head = series_fixture::patch_on(
        newest.path(),
        &[("src/optim/shared.rs", Some(SHARED))],
        "head: a technique Act 1 uses",
        65,
    );
    f.write("patches/head.patch", &head);
    f.write("src/optim/shared.rs", SHARED);
    let a1 = tempfile::tempdir().unwrap();
    series::materialize_into(f.root(), id("a1"), a1.path()).unwrap();
    let shared = SHARED.replace("w - lr * g", "w - 0.5 * lr * g");
    let patch = series_fixture::patch_on(
        a1.path(),
        &[
            ("src/optim/warmdown.rs", Some(series_fixture::A2_OWN)),
            ("src/optim/shared.rs", Some(&shared)),
        ],
        "a2: a warmdown, and half the step",
        70,
    );
    f.write("patches/a2.patch", &patch);
    let out = f.records(&["series", "record-trees", "--track", "act1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("recorded the tree of a2"), "{}", stdout(&out));
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "a2.patch's src/optim/shared.rs differs from HEAD's in the newest tree of its track: \
             Act 1 reuses the shared trainer's techniques;"
        ) && err.contains("records/a2.toml's [record] differs_from_head"),
        "{err}"
    );
    // Listed, with its reason, it passes.
    edit(
        &f,
        "records/a2.toml",
        "claim = ",
        "differs_from_head = [\"src/optim/shared.rs\"]   # Tyler halves the step here\nclaim = ",
    );
    let out = f.records(&["series", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("(1 listed as differing)"), "{}", stdout(&out));
    // A listed file the patch does not change is stale.
    edit(
        &f,
        "records/a2.toml",
        "[\"src/optim/shared.rs\"]",
        "[\"src/optim/shared.rs\", \"src/optim/adam.rs\"]",
    );
    let err = stderr(&f.records(&["series", "check"]));
    assert!(
        err.contains("records/a2.toml: [record] differs_from_head lists src/optim/adam.rs"),
        "{err}"
    );
    // A main record has no such list.
    edit(&f, "records/29.toml", "claim = ", "differs_from_head = [\"src/optim/sgd.rs\"]\nclaim = ");
    let err = stderr(&f.records(&["show", "29"]));
    assert!(err.contains("records/29.toml: record.differs_from_head is for the tracks"), "{err}");
}

#[test]
fn diff_review_walk_and_site_reach_across_tracks() {
    let f = Fixture::with_act1();
    let out = f.records(&["diff", "1", "a2", "--stat", "--no-plot"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with("records diff #1 → a2\n"), "{text}");
    assert!(
        text.contains("Commits from #1 to a2\n  a1   Step a1 title  (1 commit(s), +1 -1)"),
        "{text}"
    );
    assert!(text.contains("\n  a2   Step a2 title  (1 commit(s), +4 -0)"), "{text}");
    assert!(text.contains("official time (8xH100; 2xRTX4090)"), "{text}");
    let text = stdout(&f.records(&["diff", "29", "a1", "--stat", "--no-plot"]));
    let undo =
        text.find("Commits undone from #29 back to #1 (newest first)\n  #29  Record 29 title");
    let redo = text.find("Commits from #1 to a1\n  a1 ");
    assert!(undo.is_some() && redo > undo, "{text}");
    let text = stdout(&f.records(&["diff", "a1", "a2", "--code", "--no-plot"]));
    assert!(text.contains("Code a1 → a2") && text.contains("+/// Only in Act 1."), "{text}");

    let out = f.records(&["review", "a1"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(text.starts_with("Record a1: Step a1 title\n  Source:"), "{text}");
    assert!(!text.contains(" vs #1 "), "times on other hardware do not compare: {text}");
    assert!(text.contains("Commit 1/1: a1: a wider embedding scale"), "{text}");
    assert!(text.contains("record a1 · https://github.com/tyler-romero/nanogpt-speedrun/commit/a1 by @tyler-romero"), "{text}");

    let err = stderr(&f.records(&["walk", "a1", "29"]));
    assert!(err.contains("walk a1 29: a walk stays on one track"), "{err}");
    let catalog = Catalog::load(f.root()).unwrap();
    let stops = records::run::walk::stops(&catalog, (id("a1"), id("a2")), "walk").unwrap();
    assert_eq!(stops, [id("a1"), id("a2")]);
    assert_eq!(records::run::walk::changed(&catalog, id("a2"), false).0, "");
    assert_eq!(catalog.lab_target_of(id("a2")).unwrap().1, id("a1"));

    let site = tempfile::tempdir().unwrap();
    let out = f.records(&["site", site.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let read = |name: &str| std::fs::read_to_string(site.path().join(name)).unwrap();
    let index = read("index.html");
    let (main, act1) =
        (index.find("id=\"track-main\"").unwrap(), index.find("id=\"track-act1\"").unwrap());
    assert!(main < index.find("id=\"record-38\"").unwrap(), "{index}");
    assert!(act1 < index.find("id=\"record-a1\"").unwrap(), "{index}");
    assert!(
        index.contains("Act 1: Tyler Romero&#x27;s 2×RTX 4090 steps")
            || index.contains("Act 1: Tyler Romero's 2×RTX 4090 steps"),
        "{index}"
    );
    let a2 = read("a2.html");
    assert!(a2.contains("<h1>Record a2: Step a2 title</h1>"), "{a2}");
    assert!(
        a2.contains("href=\"a1.html\">a1</a>") && a2.contains("href=\"diff-a1-a2.html\""),
        "{a2}"
    );
    assert!(a2.contains("<dt>Source</dt>") && a2.contains(" vs a1 ("), "{a2}");
    let a1 = read("a1.html");
    assert!(a1.contains("on 2xRTX4090</dd>"), "no time against #1's on 8×H100: {a1}");
    assert!(read("29.html").contains("<dt>PR</dt>"));
    let d = read("diff-01-a1.html");
    assert!(d.contains("<h1>#1 → a1</h1>"), "{d}");
}

#[test]
fn a_lab_log_of_an_act1_step_is_judged_against_a1s_target() {
    let f = Fixture::with_act1();
    // The trainer names a record by its manifest's stem read as a number (`?` for a2); the
    // harness adds `# record_id: a2`.
    let m = Catalog::load(f.root()).unwrap().get(id("a2")).unwrap().clone();
    let t = records::run::trainer_cmd::Trainer {
        dir: f.root().into(),
        tree_id: "t".into(),
        bin: "train".into(),
        older_shape: None,
    };
    let cmd = t.cmd(&m, "lab", f.root(), f.root(), false).unwrap();
    let args: Vec<String> = cmd.args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
    assert!(args.windows(2).any(|w| w == ["--header", "record_id=a2"]), "{args:?}");
    let main = Catalog::load(f.root()).unwrap().get(29).unwrap().clone();
    let args: Vec<String> = t
        .cmd(&main, "lab", f.root(), f.root(), false)
        .unwrap()
        .args()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(!args.iter().any(|a| a.starts_with("record_id=")), "{args:?}");

    let log = f.root().join("train.log");
    std::fs::write(
        &log,
        "# record: ?\n# scale: lab\n# record_id: a2\nstep:125/125 val_loss:2.5 train_time:1000ms\n",
    )
    .unwrap();
    let out =
        f.records_with(&["verdict", log.to_str().unwrap()], &[("RECORDS_CPU", "fixture cpu")]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    assert!(text.contains("2.61") && text.contains("records/a1.toml's [lab_target]"), "{text}");
    assert!(text.contains("`# record_id: a2`"), "{text}");
}

/// `walk a1 a2` over kept runs: the stops of one track, its folder `walk/a1-a2-7/`, each run
/// kept under `walk/a1/`, `walk/a2/`.
#[test]
fn a_walk_over_act1_steps_reads_their_kept_runs() {
    use records::run::walk::{self, Run, Walk};
    let f = Fixture::with_act1();
    let catalog = Catalog::load(f.root()).unwrap();
    let results = tempfile::tempdir().unwrap();
    for (n, loss) in [("a1", 2.70), ("a2", 2.64)] {
        let m = catalog.replayable(f.root(), id(n)).unwrap();
        let dir = tempfile::tempdir().unwrap();
        series::materialize_into(f.root(), id(n), dir.path()).unwrap();
        let tree = std::fs::read_to_string(dir.path().join(series::tree::MARKER)).unwrap();
        let key = walk::run_key(&m, tree.trim(), 7, 5).unwrap();
        let dir = walk::run_dir(results.path(), id(n), &key);
        assert!(dir.starts_with(results.path().join("walk").join(n)), "{}", dir.display());
        std::fs::create_dir_all(&dir).unwrap();
        let run = Run { seed: 5, val_loss: loss, train_time_ms: 1000.0, val: vec![(7, loss)] };
        std::fs::write(dir.join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
    }
    let r = results.path().to_str().unwrap();
    let args = ["walk", "a1", "a2", "--steps", "7", "--seed", "5", "--results", r, "--no-plot"];
    let out = f.records(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{}\n{text}", stderr(&out));
    let head = "walk a1 -> a2: 2 records x 1 seed(s) at 7 lab steps; 0 run(s) to do, 2 kept";
    assert!(text.starts_with(head), "{text}");
    assert!(text.contains("a2   seed 5: val 2.6400 at step 7"), "{text}");
    assert!(text.contains("official (2×RTX4090)") && text.contains("a1 -> a2: official"), "{text}");
    // The fixture has no hardware/: the walk runs without predicted steps, saying why once.
    let err = stderr(&out);
    assert_eq!(err.matches("no predicted steps in this walk").count(), 1, "{err}");
    assert!(!err.contains("no predicted step:"), "{err}");
    let w = Walk::load(results.path(), id("a1"), id("a2"), 7).unwrap().expect("walk.json");
    assert!(results.path().join("walk/a1-a2-7/walk.json").is_file());
    assert_eq!(w.stops.iter().map(|s| s.number).collect::<Vec<_>>(), [id("a1"), id("a2")]);
    assert!(w.stops.iter().all(|s| s.predicted.is_none()));
    let json = std::fs::read_to_string(results.path().join("walk/a1-a2-7/walk.json")).unwrap();
    assert!(json.contains("\"from\": \"a1\"") && json.contains("\"number\": \"a2\""), "{json}");
}

/// Export, import and capture edit the main track's series only, and say so.
#[test]
fn export_import_and_capture_stay_on_the_main_track() {
    let f = Fixture::with_act1();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    for args in [
        &["series", "export", d, "--track", "act1"][..],
        &["series", "import", d, "--track", "act1"],
    ] {
        let err = stderr(&f.records(args));
        assert!(
            err.contains("--track act1: export and import edit the main track's series only"),
            "{err}"
        );
    }
    let err = stderr(&f.records(&["series", "capture", "a2", "--since", "HEAD"]));
    assert!(err.contains("capture makes a main record's patch"), "{err}");
    // The main series still exports, without Act 1's commits.
    let out = f.records(&["series", "export", d]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("exported 4 commit(s)"), "{}", stdout(&out));
    let err = stderr(&f.records(&["series", "record-trees", "--track", "main"]));
    assert!(err.contains("the main track's tree ids are written by"), "{err}");
    let out = f.records(&["series", "record-trees", "--track", "act1"]);
    assert!(
        stdout(&out).contains("every tree id of Act 1 was already recorded"),
        "{}",
        stdout(&out)
    );
}

/// head.patch that no longer matches the checkout is named as itself, not as #38's patch.
#[test]
fn a_stale_head_patch_is_named_as_head_patch() {
    let f = Fixture::with_act1();
    let newest = tempfile::tempdir().unwrap();
    series::materialize_into(f.root(), id("38"), newest.path()).unwrap();
    let model = series_fixture::MODEL_38.replace("h + 1.5", "h + 2.5");
    let head = series_fixture::patch_on(
        newest.path(),
        &[("src/model.rs", Some(&model))],
        "head: a technique Act 1 uses",
        65,
    );
    f.write("patches/head.patch", &head);
    f.write("src/model.rs", &series_fixture::MODEL_38.replace("h + 1.5", "h + 3.5"));
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "the checkout's trainer beyond record #38, patches/head.patch commit 1/1 \
             \"head: a technique Act 1 uses\" does not reverse-apply to the newer tree: \
             src/model.rs: hunk `@@"
        ) && err.trim_end().ends_with("; fix the hunk in patches/head.patch"),
        "{err}"
    );
}

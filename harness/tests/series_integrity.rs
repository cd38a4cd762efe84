//! Faults the series and the catalog must catch (issue 11): a patch cut at a commit boundary or
//! with a commit too many, trees that drift from the recorded ids, a manifest that does not
//! parse, a mistyped recipe key; and output that a closed pipe or a pager reads.
mod series_fixture;

use series_fixture::{stderr, stdout, Fixture};
use std::io::Read;
use std::process::{Command, Stdio};

/// The emails of a mailbox, split at their `From <id> <date>` lines.
fn emails(mbox: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in mbox.split_inclusive('\n') {
        if line.starts_with("From 0000000") || out.is_empty() {
            out.push(String::new());
        }
        out.last_mut().unwrap().push_str(line);
    }
    out
}

#[test]
fn a_patch_cut_at_a_commit_boundary_fails_naming_the_record_and_the_commit() {
    let f = Fixture::new();
    let mails = emails(&f.read("patches/29.patch"));
    assert_eq!(mails.len(), 2);
    assert!(mails[1].contains("Subject: [PATCH 2/2] Raise the learning rate to 0.2"));
    f.write("patches/29.patch", &mails[0]);
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for part in ["record #29", "patches/29.patch", "line 1", "[PATCH 1/2]", "commit 2/2 is missing"]
    {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
    println!("cut: {err}");
}

#[test]
fn an_extra_commit_fails_naming_it() {
    let f = Fixture::new();
    let mails = emails(&f.read("patches/29.patch"));
    let extra = mails[1].replace("Raise the learning rate to 0.2", "Raise it again");
    f.write("patches/29.patch", &format!("{}{}{}", mails[0], mails[1], extra));
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for part in ["record #29", "[PATCH 2/2] \"Raise it again\"", "extra commit"] {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
    println!("extra: {err}");
}

#[test]
fn trees_are_recorded_by_capture_and_a_drifted_tree_fails_the_check() {
    let f = Fixture::new();
    for n in ["01", "29", "38"] {
        let m = f.read(&format!("records/{n}.toml"));
        assert!(m.contains("\ntree = \""), "records/{n}.toml has no tree id:\n{m}");
    }
    let out = f.records(&["series", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("not recorded"), "{}", stdout(&out));

    // A change outside the series: every tree moves, and the newest is reported first, blamed
    // on the checkout.
    f.write("src/old_notes.rs", "// not in any patch\n");
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    for part in [
        "records/38.toml: record.tree = ",
        "but the checkout's trainer files (src/, tests/, Cargo.toml, ...) give #38 the tree",
        "a trainer file changed outside the series",
        "records series import",
    ] {
        assert!(err.contains(part), "missing {part:?} in {err}");
    }
    println!("drift: {err}");

    // Export and import record the new trees, and the check passes again.
    let export = f.root().join("target/export");
    let out = f.records(&["series", "export", export.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = f.records(&["series", "import", export.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = f.records(&["series", "check"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_changed_removed_line_is_blamed_on_its_patch_and_its_tree_never_used() {
    let f = Fixture::new();
    let p38 = f.read("patches/38.patch");
    assert!(p38.contains("\n-    h + 1.0\n"));
    // One byte of a removed line: the patch still applies both ways, but #29's and #1's trees
    // would hold the changed line.
    f.write("patches/38.patch", &p38.replace("\n-    h + 1.0\n", "\n-    h + 1.1\n"));
    // Shards that pass the shard check, so the commands get as far as the tree.
    let data = f.root().join("target/shards");
    std::fs::create_dir_all(&data).unwrap();
    for split in ["train_000001", "val_000000"] {
        corpus::shard::write_shard(&data.join(format!("x_{split}.bin")), &[1, 2, 3]).unwrap();
    }
    let data = data.to_str().unwrap();
    for args in [
        &["series", "check"][..],
        &["series", "tree", "29"],
        &["series", "tree", "1"],
        &["diff", "1", "38"],
        &["replay", "29", "--scale", "full", "--data", data],
        &["bench", "29", "--data", data],
        &["profile", "29", "--data", data],
    ] {
        let out = f.records(args);
        let err = stderr(&out);
        assert!(!out.status.success(), "{args:?} succeeded: {}", stdout(&out));
        for part in [
            "records/29.toml: record.tree = ",
            "reverse-applying patches/38.patch gives #29 the tree",
            "patches/38.patch changed since the trees were recorded",
        ] {
            assert!(err.contains(part), "{args:?}: missing {part:?} in {err}");
        }
        assert!(!err.contains("29.patch") && !err.contains("building"), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    }
    assert!(!f.root().join("target/records/trees/29").exists(), "the wrong tree was written");
    println!("blame: {}", stderr(&f.records(&["series", "tree", "1"])));
}

#[test]
fn a_manifest_that_does_not_parse_leaves_the_others_usable() {
    let f = Fixture::new();
    let m = f.read("records/29.toml").replacen("title = ", "title = = ", 1);
    f.write("records/29.toml", &m);

    let out = f.records(&["list"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(text.contains("Record 1 title") && text.contains("Record 38 title"), "{text}");
    assert!(err.contains("records/29.toml: line 3:") && err.contains("(left out)"), "{err}");
    println!("list: {err}");

    let out = f.records(&["show", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = f.records(&["show", "29"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("error: ") && err.contains("records/29.toml: line 3:"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // The broken record keeps its place in the chain: #1's tree is still right.
    let out = f.records(&["series", "tree", "1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let dir = stdout(&out).trim().to_string();
    let lib = std::fs::read_to_string(std::path::Path::new(&dir).join("src/lib.rs")).unwrap();
    assert_eq!(lib, series_fixture::LIB_1);
    let out = f.records(&["series", "check"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("records/29.toml: line 3:"), "{}", stderr(&out));
}

#[test]
fn a_recipe_the_trainer_would_refuse_is_refused_before_anything_builds() {
    let f = Fixture::new();
    let m = f.read("records/29.toml");
    let cases = [
        (
            "\nn_layer = 12\n",
            "\nn_layer = \"eleven\"\n",
            ": recipe: invalid type: string \"eleven\", expected usize",
        ),
        (
            "\nseed = 42\n",
            "\nseed = 42\nmtp = { weights = [1.0, -1.0] }\n",
            "mtp = [1.0, -1.0] needs 2 to 4 positive weights",
        ),
        (
            "\nsteps = 100\n",
            "\nsteps = 100\nn_headd = 4\n",
            "at lab scale: lab.n_headd: not a recipe key",
        ),
    ];
    for (from, to, want) in cases {
        assert!(m.contains(from), "{from}");
        f.write("records/29.toml", &m.replacen(from, to, 1));
        for args in [&["show", "29"][..], &["series", "check"], &["replay", "29"]] {
            let out = f.records(args);
            let err = stderr(&out);
            assert!(!out.status.success(), "{args:?}");
            assert!(err.contains("records/29.toml:") && err.contains(want), "{args:?}: {err}");
            assert!(!err.contains("building"), "{args:?} built first: {err}");
        }
        println!("{to:?}: {}", stderr(&f.records(&["show", "29"])));
    }
}

#[test]
fn a_mistyped_recipe_key_is_named_with_its_line_and_a_suggestion() {
    let f = Fixture::new();
    let m = f.read("records/29.toml").replace("\nlr = 0.2 ", "\nlrr = 0.2 ");
    f.write("records/29.toml", &m);
    let line = m.lines().position(|l| l.starts_with("lrr = ")).unwrap() + 1;
    let want = format!("records/29.toml:{line}: unknown recipe key `lrr`; did you mean `lr`?");
    for args in [&["show", "29"][..], &["series", "check"], &["replay", "29"]] {
        let out = f.records(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr(&out).contains(&want), "{args:?}: {}", stderr(&out));
    }
    let out = f.records(&["list"]);
    assert!(out.status.success() && stderr(&out).contains(&want), "{}", stderr(&out));
    println!("key: {}", stderr(&out));
}

#[test]
fn a_corrupt_hunk_is_reported_once() {
    let f = Fixture::new();
    let p38 = f.read("patches/38.patch");
    // The file ends inside its last hunk.
    let last_hunk = p38.rfind("\n@@ ").unwrap();
    let cut = last_hunk + 1 + p38[last_hunk + 1..].find('\n').unwrap() + 1;
    f.write("patches/38.patch", &p38[..cut]);
    let out = f.records(&["series", "check"]);
    let err = stderr(&out);
    assert!(!out.status.success());
    // libgit2's words, at the cut file's `diff --git` line.
    assert!(err.contains("record #38") && err.contains("invalid patch hunk, expected"), "{err}");
    assert_eq!(err.matches("invalid patch hunk").count(), 1, "{err}");
    println!("hunk: {err}");
}

#[test]
fn a_missing_file_is_reported_once() {
    let f = Fixture::new();
    let out = f.records(&["data", "info", "/nonexistent/x_val_000000.bin"]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    println!("missing: {err}");
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let f = Fixture::new();
    for args in [&["diff", "1", "38"][..], &["show", "29"], &["review", "29"], &["series", "check"]]
    {
        let mut child =
            f.command().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        drop(child.stdout.take()); // `| head -0`: the reader is gone before the first line
        let mut err = String::new();
        child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.success() || status.signal() == Some(libc::SIGPIPE),
            "{args:?}: {status:?} {err}"
        );
        assert!(!err.contains("Broken pipe") && !err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Runs `records ARGS` on a pseudo-terminal (util-linux `script`), with a pager that copies
/// what it reads into `paged`.
fn on_a_terminal(f: &Fixture, args: &str, paged: &std::path::Path) -> std::process::Output {
    let cmd = format!("{} {args}", env!("CARGO_BIN_EXE_records"));
    series_fixture::sandbox::hermetic(Command::new("script"), f.root(), f.root())
        .args(["-qec", &cmd, "/dev/null"])
        .env("PAGER", format!("cat > {}", paged.display()))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn long_output_on_a_terminal_goes_through_the_pager() {
    let f = Fixture::new();
    let paged = f.root().join("target/paged.txt");
    std::fs::create_dir_all(paged.parent().unwrap()).unwrap();
    let out = on_a_terminal(&f, "diff 1 38", &paged);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = std::fs::read_to_string(&paged).unwrap();
    assert!(text.contains("src/model.rs"), "{text}");

    std::fs::remove_file(&paged).unwrap();
    let out = on_a_terminal(&f, "diff 1 38 --no-pager", &paged);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!paged.exists(), "--no-pager still paged");
    assert!(stdout(&out).contains("src/model.rs"));

    // Not a terminal: no pager.
    let out = f
        .command()
        .args(["diff", "1", "38"])
        .env("PAGER", format!("cat > {}", paged.display()))
        .output()
        .unwrap();
    assert!(out.status.success() && stdout(&out).contains("src/model.rs"));
    assert!(!paged.exists(), "paged into a pipe");
}

#[test]
fn diff_draws_its_curves_before_the_code() {
    let f = Fixture::new();
    let paged = f.root().join("target/paged.txt");
    let out = on_a_terminal(&f, "diff 1 38 --no-pager", &paged);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let facts = text.find("official time (8xH100)").expect(&text);
    let curves = text.find("#1 and #38 official val loss").expect(&text);
    let code = text.find("Code #1 → #38").expect(&text);
    assert!(facts < curves && curves < code, "{text}");
}

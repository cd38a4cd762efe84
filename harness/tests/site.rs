//! `records site`: the pages written for the real checkout, read back as HTML, and rendered by
//! a real browser (Debian's chromium, headless) where one is installed.
use records::catalog::{Catalog, Manifest};
use records::verdict::runlog;
use records::verdict::Verdict;
use scraper::{ElementRef, Html, Selector};
use std::path::{Path, PathBuf};
use std::process::Command;

mod sandbox;

use sandbox::Sandbox;

fn root() -> PathBuf {
    sandbox::checkout()
}

/// A lab replay of #29 under `results/29/`, as `records replay` writes it: the run's
/// metrics.jsonl and the verdict judged from its log.
fn lab_replay(results: &Path) {
    let losses = [5.7683, 2.41, 2.21, 2.09, 2.0, 1.95, 1.9, 1.87, 1.84, 1.82, 1.8096];
    let dir = results.join("29/20261201T090000Z-4242-lab");
    std::fs::create_dir_all(dir.join("run-1")).unwrap();
    let (mut log, mut jsonl) = (String::new(), String::new());
    for (i, l) in losses.iter().enumerate() {
        let (step, ms) = (25 * i as u64, 1100.0 * i as f64);
        log += &format!("step:{step}/250 val_loss:{l:.4} train_time:{ms:.0}ms step_avg:44.00ms\n");
        jsonl += &format!(
            "{{\"type\":\"val\",\"step\":{step},\"val_loss\":{l},\"train_time_ms\":{ms}}}\n"
        );
    }
    std::fs::write(dir.join("run-1/train.log"), &log).unwrap();
    std::fs::write(dir.join("run-1/metrics.jsonl"), jsonl).unwrap();
    let v = Verdict::new(&[runlog::parse(&log)], 2.5284, 163.84, 250).unwrap().at_lab_scale();
    std::fs::write(dir.join("verdict.json"), serde_json::to_string(&v).unwrap()).unwrap();
}

/// A 3-step `--steps` smoke run of record `n`, newer than any other replay.
fn smoke_replay(results: &Path, n: u32) {
    let dir = results.join(format!("{n:02}/20261202T090000Z-4343-lab"));
    std::fs::create_dir_all(&dir).unwrap();
    let log = "step:3/3 val_loss:5.1000 train_time:1000ms step_avg:333.00ms\n";
    let v = Verdict::new(&[runlog::parse(log)], 1.8096, 100.0, 3).unwrap().at_lab_scale();
    std::fs::write(dir.join("verdict.json"), serde_json::to_string(&v).unwrap()).unwrap();
}

/// Writes the site for the checkout, with the replays above (#29's whole and a newer smoke
/// run, #53's smoke run alone), into a temp folder.
fn build_site() -> (Sandbox, PathBuf) {
    let sandbox = Sandbox::new();
    let (results, out) = (sandbox.results(), sandbox.path().join("site"));
    lab_replay(&results);
    smoke_replay(&results, 29);
    smoke_replay(&results, 53);
    let o = sandbox.records().arg("site").arg(&out).output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    eprintln!("{stdout}");
    (sandbox, out)
}

fn sel(s: &str) -> Selector {
    Selector::parse(s).unwrap()
}

fn text(e: ElementRef) -> String {
    e.text().collect()
}

/// The index has one row per record, with its link, official time and steps, the lab verdict
/// where this machine has one, and a mini curve.
fn check_index(dom: &Html, catalog: &Catalog) {
    for m in catalog.records() {
        let r = &m.record;
        let row = dom
            .select(&sel(&format!("tr#record-{}", m.id().bare())))
            .next()
            .unwrap_or_else(|| panic!("no row for {}", m.id()));
        let t = text(row);
        assert!(t.contains(&r.title) && t.contains(&r.official_time_text), "{t}");
        assert!(t.contains(&r.steps.to_string()) && t.contains(&r.date), "{t}");
        let links: Vec<&str> =
            row.select(&sel("a")).filter_map(|a| a.value().attr("href")).collect();
        assert!(links.contains(&format!("{}.html", m.id().slug()).as_str()), "{links:?}");
        assert!(links.contains(&r.link.as_str()), "{links:?}");
        assert!(row.select(&sel("td.spark svg path, td.spark svg polyline")).next().is_some());
    }
    // A record's lab result is its newest replay over its whole lab budget, never a newer
    // shortened run; a record with only a shortened run says so.
    let lab = text(dom.select(&sel("tr#record-29")).next().unwrap());
    assert!(lab.contains("REACHED") && lab.contains("11.0 s"), "{lab}");
    assert!(!lab.contains("NOT REACHED"), "the newer smoke run shown: {lab}");
    let short = text(dom.select(&sel("tr#record-53")).next().unwrap());
    assert!(short.contains("only a shortened run here (3 of 287 steps)"), "{short}");
    assert!(!short.contains("REACHED"), "{short}");
    let none = text(dom.select(&sel("tr#record-1")).next().unwrap());
    assert!(none.contains("not replayed here"), "{none}");
}

/// Every note of the record sits beside the line it anchors: the note names its file and line
/// in the record's tree, and the diff line holding it is in that file and holds the anchor.
fn check_notes(dom: &Html, m: &Manifest) {
    for note in &m.notes {
        let notes = sel(&format!(
            "div.line.noted[data-file=\"{}\"] > div.notes > aside.note[data-file=\"{}\"][data-line=\"{}\"]",
            note.file, note.file, note.line
        ));
        let aside = dom
            .select(&notes)
            .find(|a| text(*a).contains(note.text.trim()))
            .unwrap_or_else(|| panic!("no note beside {}:{}", note.file, note.line));
        let line = ElementRef::wrap(aside.parent().unwrap().parent().unwrap()).unwrap();
        let code = text(line.select(&sel("code")).next().unwrap());
        if let Some(anchor) = &note.anchor {
            assert!(code.contains(anchor.as_str()), "{}:{}: {code}", note.file, note.line);
        }
    }
}

/// Reads the official curve back from the by-step figure: each marker's centre, mapped through
/// the figure's axis mapping, is the manifest's (step, loss) within one pixel.
fn check_curve(dom: &Html, m: &Manifest) {
    let fig = dom
        .select(&sel("figure.curve"))
        .find(|f| text(*f).contains("x: step (official, full scale)"))
        .expect("an official by-step figure");
    let map = |attr: &str| -> Vec<f64> {
        let v: Vec<f64> =
            fig.value().attr(attr).unwrap().split(' ').map(|x| x.parse().unwrap()).collect();
        assert_eq!(v.len(), 4, "{attr}");
        v
    };
    let (xm, ym) = (map("data-x-map"), map("data-y-map"));
    let back = |p: f64, m: &[f64]| m[0] + (p - m[1]) * (m[2] - m[0]) / (m[3] - m[1]);
    let px = |m: &[f64]| (m[2] - m[0]) / (m[3] - m[1]).abs();
    let colour = "#0072B2"; // the first curve's colour
    let points: Vec<(f64, f64)> = fig
        .select(&sel("svg circle"))
        .filter(|c| c.value().attr("fill") == Some(colour))
        .map(|c| {
            let a = |k| c.value().attr(k).unwrap().parse::<f64>().unwrap();
            (back(a("cx"), &xm), back(a("cy"), &ym))
        })
        .collect();
    let curve = &m.evidence.val_curve;
    assert_eq!(points.len(), curve.len(), "{points:?}");
    for (&(step, loss), &(x, y)) in curve.iter().zip(&points) {
        assert!((x - step as f64).abs() <= px(&xm).abs(), "step {step} read back as {x}");
        assert!((y - loss).abs() <= px(&ym).abs(), "loss {loss} at {step} read back as {y}");
    }
    assert!(fig.select(&sel("svg text")).any(|t| text(t).contains("target 3.28")));
}

#[test]
fn pages_hold_the_manifests_facts_notes_and_curves() {
    let (_tmp, out) = build_site();
    let catalog = Catalog::load(&root()).unwrap();
    let read = |name: &str| Html::parse_document(&std::fs::read_to_string(out.join(name)).unwrap());
    check_index(&read("index.html"), &catalog);
    for m in catalog.records() {
        let n = m.id();
        let dom = read(&format!("{}.html", n.slug()));
        check_notes(&dom, m);
        check_curve(&dom, m);
        if let Some(p) = m.record.parent {
            let diff = read(&format!("diff-{}-{}.html", p.slug(), n.slug()));
            let h1 = text(diff.select(&sel("h1")).next().unwrap());
            assert_eq!(h1, format!("{p} → {n}"));
            assert!(diff.select(&sel("div.line.add")).next().is_some());
            assert!(diff.select(&sel("figure.curve svg")).count() >= 1);
        }
    }
    // Commits are credited to the upstream record they port, never to whoever committed it.
    let metas: Vec<String> = read("62.html").select(&sel("p.meta")).map(text).collect();
    assert!(metas.iter().any(|m| m.starts_with("upstream #55 · PR #")), "{metas:?}");
    assert!(metas.iter().all(|m| !m.contains("maintainers")), "{metas:?}");
    let lab = read("29.html");
    // The official t-test worded as the terminal words it.
    let evidence = text(lab.root_element());
    assert!(
        evidence.contains("one-sided t-test of mean < 3.28: p = 0.0001 (t = −8.80, df = 6)"),
        "{evidence}"
    );
    assert!(!evidence.contains("that the mean is not below"), "{evidence}");
    let rows: Vec<String> = lab.select(&sel("table.replays tr")).map(text).collect();
    let row = |id: &str| rows.iter().find(|r| r.contains(id)).unwrap_or_else(|| panic!("{rows:?}"));
    assert!(row("20261202T090000Z-4343-lab").contains("3 of 250 steps (shortened)"), "{rows:?}");
    assert!(!row("20261201T090000Z-4242-lab").contains("shortened"), "{rows:?}");
    let lab_fig = lab.select(&sel("figure.curve")).find(|f| text(*f).contains("ours, lab scale"));
    let lab_fig = lab_fig.expect("a figure of our lab replay");
    // The modern records are judged against #29's lab target, #1 against its own.
    let manifest = std::fs::read_to_string(root().join("records/29.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&manifest).unwrap();
    let target = manifest["lab_target"]["val_loss"].as_float().unwrap();
    let label = format!("lab target {target:.4}");
    assert!(lab_fig.select(&sel("svg text")).any(|t| text(t).contains(&label)), "{label}");
}

const CHROMIUM: &str = "/usr/bin/chromium";

/// Runs headless chromium on `page` with `args`; its stdout.
fn chromium(page: &Path, args: &[String]) -> String {
    let profile = tempfile::tempdir().unwrap();
    let o = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "chromium failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn chromium_renders_the_index_and_record_29() {
    if !Path::new(CHROMIUM).exists() {
        sandbox::skip(&format!(
            "{CHROMIUM} is missing; `apt-get install -y chromium` (.ci/run does)"
        ));
        return;
    }
    let (_tmp, out) = build_site();
    let catalog = Catalog::load(&root()).unwrap();
    let index = Html::parse_document(&chromium(&out.join("index.html"), &["--dump-dom".into()]));
    check_index(&index, &catalog);
    let m = catalog.get(29).unwrap();
    assert!(!m.notes.is_empty());
    let page = Html::parse_document(&chromium(&out.join("29.html"), &["--dump-dom".into()]));
    check_notes(&page, m);
    check_curve(&page, m);

    // Screenshots to look at: desktop and phone widths.
    let shots = std::env::var_os("SITE_SHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| records::paths::cargo_target_dir(&root()).join("site-shots"));
    std::fs::create_dir_all(&shots).unwrap();
    for (page, h) in [("index", 900), ("29", 3000)] {
        for (device, w) in [("desktop", 1280), ("phone", 390)] {
            let file = shots.join(format!("{page}-{device}.png"));
            chromium(
                &out.join(format!("{page}.html")),
                &[format!("--screenshot={}", file.display()), format!("--window-size={w},{h}")],
            );
            let png = std::fs::read(&file).unwrap();
            assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{}", file.display());
            eprintln!("screenshot: {}", file.display());
        }
    }
}

#[test]
fn a_page_that_cannot_be_written_is_named_and_leaves_no_temp_file() {
    let sandbox = Sandbox::new();
    let out = sandbox.path().join("site");
    // A folder where the page of #29 goes: the rename into place fails.
    std::fs::create_dir_all(out.join("29.html/in-the-way")).unwrap();
    let o = sandbox.records().arg("site").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains(&format!("writing {}", out.join("29.html").display())), "{err}");
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
}

/// A replay whose metrics.jsonl was cut is named in a warning and left out of its page; every
/// page is still written.
#[test]
fn a_cut_metrics_file_leaves_out_its_run_not_the_site() {
    let sandbox = Sandbox::new();
    let results = sandbox.results();
    lab_replay(&results);
    let run = results.join("29/20261201T090000Z-4242-lab/run-1/metrics.jsonl");
    let text = std::fs::read_to_string(&run).unwrap();
    std::fs::write(&run, &text[..text.len() / 2]).unwrap();
    let out = sandbox.path().join("site");
    let o = sandbox.records().arg("site").arg(&out).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("run-1/metrics.jsonl: line ") && err.contains("is damaged"), "{err}");
    for page in ["index.html", "01.html", "29.html", "84.html"] {
        assert!(out.join(page).is_file(), "{page}");
    }
}

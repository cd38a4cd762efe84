//! `records cost N`: record N's training step on a simulated machine, predicted from its
//! recipe; `records cost A B`: every record from A to B in one table (Act 1 on its 2×RTX 4090,
//! or on 8×H100 with `--hardware h100-sxm --gpus 8`); `records cost --validate`: the model against every upstream log; `--fit`: the six
//! achieved fractions fitted on the records `hardware/achieved.toml` names.
use anyhow::{bail, Result};
use records::catalog::RecordId;
use records::cost::achieved::{self, Achieved};
use records::cost::hardware::{self, Hardware};
use records::cost::record::{self, Costed, Prediction};
use records::cost::validate::{self, Report};
use records::paths;
use records::text::figures;
use records::text::table::{clip, Format, Table};

#[derive(clap::Args)]
pub struct Args {
    /// Record (29, a3), or an upstream record inside a step (`list --all`).
    pub record: Option<RecordId>,
    /// With it: every record from RECORD to TO on one track, a row each.
    #[arg(conflicts_with_all = ["validate", "fit"])]
    pub to: Option<RecordId>,
    /// The machine, a file of hardware/ (h100-sxm, h200, rtx-4090) [default: the record's].
    #[arg(long)]
    pub hardware: Option<String>,
    /// GPUs (ranks) [default: the record's]; the batch is split over them.
    #[arg(long)]
    pub gpus: Option<usize>,
    /// Every record with a logged time: logged against predicted, the held-out error.
    #[arg(long, conflicts_with = "record")]
    pub validate: bool,
    /// Fit the achieved fractions on hardware/achieved.toml's records and print the file.
    #[arg(long, conflicts_with_all = ["record", "validate"])]
    pub fit: bool,
    /// text, md or json.
    #[arg(long, default_value = "text")]
    pub format: String,
}

pub fn run(args: Args) -> Result<()> {
    let root = paths::repo_root()?;
    let catalog = super::load_catalog(&root, args.record)?;
    let machines = hardware::all(&root)?;
    let achieved = achieved::read(&root)?;
    let json = args.format == "json";
    let format = match args.format.as_str() {
        "text" | "json" => Format::Text,
        "md" => Format::Markdown,
        other => bail!("--format {other}: expected text, md or json"),
    };
    if args.fit || args.validate {
        let cases = validate::cases(&catalog, &machines)?;
        let fit_cases: Vec<_> = cases
            .iter()
            .filter(|c| achieved.fitted_on.contains(&c.costed.id.to_string()))
            .collect();
        if args.fit {
            let a = Achieved {
                fitted_on: achieved.fitted_on.clone(),
                fractions: validate::fit(&fit_cases),
            };
            print!("{}", toml::to_string(&a)?);
            return Ok(());
        }
        let report = validate::report(&cases, &achieved.fitted_on, &achieved.fractions);
        match json {
            true => println!("{}", serde_json::to_string_pretty(&report)?),
            false => print_report(&report, &achieved, format),
        }
        return Ok(());
    }
    let Some(id) = args.record else { bail!("name a record (records cost 84), or --validate") };
    if let Some(to) = args.to {
        let rows = range(&catalog, (id, to), (&machines, &args), &achieved)?;
        match json {
            true => println!("{}", serde_json::to_string_pretty(&rows)?),
            false => print_range(&rows, &achieved, format),
        }
        return Ok(());
    }
    let costed = record::of(&catalog, id)?;
    let (hw, gpus) = asked_machine(&costed, &machines, &args)?;
    let p = costed.predict(hw, gpus, &achieved.fractions);
    match json {
        true => println!("{}", serde_json::to_string_pretty(&json_of(&costed, hw, gpus, &p))?),
        false => print_prediction(&costed, hw, gpus, &p, &achieved, format),
    }
    Ok(())
}

/// The machine and GPU count `--hardware` and `--gpus` ask for (the record's own by default).
fn asked_machine<'m>(
    c: &Costed,
    machines: &'m [Hardware],
    args: &Args,
) -> Result<(&'m Hardware, usize)> {
    let (own, own_gpus) = c.machine(machines)?;
    let hw = match &args.hardware {
        Some(key) => hardware::find(machines, key)?,
        None => own,
    };
    Ok((hw, args.gpus.unwrap_or(own_gpus)))
}

/// One record of a range on the machine asked for (or its own).
#[derive(serde::Serialize)]
struct RangeRow {
    record: String,
    title: String,
    machine: String,
    timed_steps: u64,
    predicted_ms_per_step: f64,
    predicted_train_time_s: f64,
    /// Where the record was logged on this machine.
    logged_train_time_s: Option<f64>,
}

fn range(
    catalog: &records::catalog::Catalog,
    (from, to): (RecordId, RecordId),
    (machines, args): (&[Hardware], &Args),
    achieved: &Achieved,
) -> Result<Vec<RangeRow>> {
    let mut rows = Vec::new();
    for id in records::run::walk::stops(catalog, (from, to), "cost")? {
        let c = record::of(catalog, id)?;
        let (hw, gpus) = asked_machine(&c, machines, args)?;
        let p = c.predict(hw, gpus, &achieved.fractions);
        rows.push(RangeRow {
            record: id.to_string(),
            title: c.title.clone(),
            machine: format!("{gpus}×{}", hw.name),
            timed_steps: p.timed_steps,
            predicted_ms_per_step: p.predicted_ms_per_step,
            predicted_train_time_s: p.predicted_train_time_s,
            logged_train_time_s: c.logged_on(hw, gpus).map(|l| l.train_time_s),
        });
    }
    Ok(rows)
}

fn print_range(rows: &[RangeRow], a: &Achieved, format: Format) {
    let machines: std::collections::BTreeSet<_> = rows.iter().map(|r| r.machine.as_str()).collect();
    let on: Vec<_> = machines.into_iter().collect();
    println!("# Predicted on {}, counted from each recipe", on.join(", "));
    println!(
        "(achieved fractions fitted on {}; logged: upstream's, on this machine only)\n",
        a.fitted_on.join(" ")
    );
    let mut t = Table::new([
        "record",
        "timed steps",
        "predicted ms/step",
        "Δ predicted/step",
        "predicted train time",
        "logged train time",
        "predicted/logged",
    ]);
    for (i, r) in rows.iter().enumerate() {
        let delta = match i {
            0 => String::new(),
            _ => figures::ms_change(rows[i - 1].predicted_ms_per_step, r.predicted_ms_per_step),
        };
        let logged = r.logged_train_time_s;
        t.row([
            format!("{} {}", r.record, clip(&r.title, 36)),
            r.timed_steps.to_string(),
            format!("{:.2}", r.predicted_ms_per_step),
            delta,
            duration(r.predicted_train_time_s),
            logged.map_or("-".into(), duration),
            logged.map_or("-".into(), |l| {
                figures::pct_delta(100.0 * (r.predicted_train_time_s / l - 1.0))
            }),
        ]);
    }
    println!("{}", t.render(format));
}

/// `83.9 s`, `23.3 min`, `8.13 h`: a train time at the scale a reader thinks in.
fn duration(s: f64) -> String {
    match s {
        s if s < 600.0 => format!("{s:.1} s"),
        s if s < 3.0 * 3600.0 => format!("{:.1} min", s / 60.0),
        s => format!("{:.2} h", s / 3600.0),
    }
}

fn json_of(c: &Costed, hw: &Hardware, gpus: usize, p: &Prediction) -> serde_json::Value {
    let logged = c.logged_on(hw, gpus);
    serde_json::json!({
        "record": c.id.to_string(),
        "hardware": hw.key,
        "gpus": gpus,
        "predicted_ms_per_step": p.predicted_ms_per_step,
        "predicted_train_time_s": p.predicted_train_time_s,
        "timed_steps": p.timed_steps,
        "where_the_time_goes_ms": p.mean,
        "stages": p.stages,
        "logged_train_time_s": logged.map(|l| l.train_time_s),
        "logged_ms_per_step": logged.map(|l| l.train_time_s * 1e3 / p.timed_steps.max(1) as f64),
    })
}

fn print_prediction(
    c: &Costed,
    hw: &Hardware,
    gpus: usize,
    p: &Prediction,
    a: &Achieved,
    format: Format,
) {
    println!("# {} on {gpus}×{}: predicted, counted from its recipe", c.id, hw.name);
    println!(
        "(achieved fractions fitted on {}; hardware/{}.toml)\n",
        a.fitted_on.join(" "),
        hw.key
    );
    let mut t = Table::new([
        "steps",
        "tokens/rank",
        "windows",
        "doc",
        "bf16 TFLOP",
        "fp8 TFLOP",
        "attn TFLOP",
        "mem GB",
        "comm GB",
        "predicted ms/step",
    ]);
    for s in &p.stages {
        let w = &s.work;
        t.row([
            format!("{}-{}", s.first_step, s.first_step + s.steps - 1),
            s.tokens_per_rank.to_string(),
            match s.windows {
                (0, 0) => "-".into(),
                (l, sh) => format!("{l}/{sh}"),
            },
            s.doc_len.map_or("-".into(), |d| d.to_string()),
            format!("{:.2}", w.matmul_bf16_flops / 1e12),
            format!("{:.2}", w.matmul_fp8_flops / 1e12),
            format!("{:.2}", w.attention_flops / 1e12),
            format!("{:.2}", (w.other_bytes + w.optimizer_bytes) / 1e9),
            format!("{:.2}", w.comm_bytes / 1e9),
            format!("{:.2}", s.ms.total()),
        ]);
    }
    println!("{}", t.render(format));
    println!("\nWhere the time goes, predicted (mean over {} timed steps):\n", p.timed_steps);
    let mut t = Table::new(["category", "ms/step", "share"]).left(0);
    for (name, ms) in p.mean.rows() {
        t.row([
            name.to_string(),
            format!("{ms:.2}"),
            format!("{:.0}%", 100.0 * ms / p.mean.total()),
        ]);
    }
    println!("{}", t.render(format));
    println!(
        "\npredicted: {:.2} ms/step, {:.1} s of training",
        p.predicted_ms_per_step, p.predicted_train_time_s
    );
    if let Some(l) = c.logged_on(hw, gpus) {
        let what = match l.logs {
            0 => "the record table's time".to_string(),
            n => format!("mean of {n} logs"),
        };
        println!(
            "logged ({}): {:.2} ms/step, {:.1} s ({what}); predicted/logged {:+.1}%",
            c.hardware,
            l.train_time_s * 1e3 / p.timed_steps.max(1) as f64,
            l.train_time_s,
            100.0 * (p.predicted_train_time_s / l.train_time_s - 1.0)
        );
    }
}

fn print_report(r: &Report, a: &Achieved, format: Format) {
    println!("# The time model against upstream's logs: predicted (from each recipe) and logged");
    println!("(logged: the mean final train_time of a record's logs over its timed steps; fitted on {})\n", a.fitted_on.join(" "));
    let mut t = Table::new([
        "record",
        "machine",
        "logs",
        "logged ms/step",
        "predicted ms/step",
        "error",
        "",
    ]);
    for row in &r.rows {
        let note = match (row.fitted, &row.same_math) {
            (true, _) => "fitted".to_string(),
            (false, Some(_)) => "same math".to_string(),
            _ => String::new(),
        };
        t.row([
            row.record.clone(),
            row.hardware.clone(),
            row.logs.to_string(),
            format!("{:.2}", row.logged_ms_per_step),
            format!("{:.2}", row.predicted_ms_per_step),
            format!("{:+.1}%", 100.0 * row.error),
            note,
        ]);
    }
    println!("{}", t.render(format));
    let right = r.pairs.iter().filter(|p| p.sign_right).count();
    println!(
        "\nsign of Δ train time: right in {right} of {} consecutive pairs whose logged Δ exceeds 2%",
        r.pairs.len()
    );
    for p in r.pairs.iter().filter(|p| !p.sign_right) {
        let why = if p.predicted_delta == 0.0 { " (no count changes)" } else { "" };
        println!(
            "  wrong: {} → {}: logged {:+.1}%, predicted {:+.1}%{why}",
            p.from,
            p.to,
            100.0 * p.logged_delta,
            100.0 * p.predicted_delta
        );
    }
    print_spans(r, format);
    println!("held out: {} records, median |error| {:.1}%", r.held_out, 100.0 * r.median_abs_error);
}

/// Stage by stage: each record's spans between the validations of its curve log (the full list
/// is in `--format json`), their median error and the worst.
fn print_spans(r: &Report, format: Format) {
    println!("\nstage by stage: the logged train_time between validations of each curve log\n");
    let mut t = Table::new([
        "record",
        "spans",
        "median abs error",
        "worst span",
        "logged",
        "predicted",
        "error",
    ]);
    for row in r.rows.iter().filter(|row| !row.spans.is_empty()) {
        let abs: Vec<f64> = row.spans.iter().map(|s| s.error.abs()).collect();
        let worst = (row.spans.iter()).max_by(|a, b| a.error.abs().total_cmp(&b.error.abs()));
        let Some(w) = worst else { continue };
        t.row([
            format!("{}{}", row.record, if row.fitted { " (fitted)" } else { "" }),
            row.spans.len().to_string(),
            format!("{:.1}%", 100.0 * validate::median(abs)),
            format!("{}-{}", w.steps.0, w.steps.1),
            format!("{:.2} ms", w.logged_ms_per_step),
            format!("{:.2} ms", w.predicted_ms_per_step),
            figures::pct_delta(100.0 * w.error),
        ]);
    }
    println!("{}", t.render(format));
    for s in &r.spans {
        println!(
            "held out, stage by stage on {}: {} spans, median |error| {:.1}%",
            s.hardware,
            s.spans,
            100.0 * s.median_abs_error
        );
    }
}

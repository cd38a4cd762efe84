//! `records diff A B`: the commits between two records, their recipe diff and their code diff.
use records::catalog::{Catalog, RecordId};
use records::paths;
use records::present::diff::{self, Paint, Parts};
use records::present::plot::{self, Chart, XAxis};
use records::run::replays;
use std::io::IsTerminal;

/// What changed between two records (either order): the commits between them, the recipe and
/// the code. With none of --stat/--recipe/--code, all three.
#[derive(clap::Args)]
pub struct Args {
    /// One record (see `records list`: 29, a3), or an upstream record inside a step (`list --all`:
    /// then the upstream records between, the recipe diff and each one's commit).
    pub a: RecordId,
    /// The other record; A and B may come in either order.
    pub b: RecordId,
    /// The series view: commits between A and B with line counts, and the files changed.
    #[arg(long)]
    pub stat: bool,
    /// The recipe diff of the two manifests.
    #[arg(long)]
    pub recipe: bool,
    /// The code diff of the two trees.
    #[arg(long)]
    pub code: bool,
    /// Print no official val-loss curves (none are printed when stdout is not a terminal).
    #[arg(long)]
    pub no_plot: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.a != args.b,
        "records diff {} {}: the same record on both sides; give two (`records diff {} <another>`)",
        args.a.bare(),
        args.b.bare(),
        args.a.bare()
    );
    let root = paths::repo_root()?;
    if let Some(text) = diff::upstream::render(&root, args.a, args.b, Paint(colour()))? {
        print!("{text}");
        return Ok(());
    }
    let all = !(args.stat || args.recipe || args.code);
    let parts =
        Parts { series: all || args.stat, recipe: all || args.recipe, code: all || args.code };
    let text = diff::render(&root, args.a, args.b, parts, Paint(colour()))?;
    print!("{}", text.head);
    let catalog = Catalog::load(&root)?;
    let (ma, mb) = (catalog.get(args.a)?, catalog.get(args.b)?);
    let chart = Chart::official_pair(ma, mb, XAxis::Step);
    plot::term::print(chart.as_slice(), !args.no_plot);
    // Both lab curves when both records have been replayed here.
    let results = paths::results_dir(&root);
    let (ra, rb) = (replays::lab_result_in(&results, ma)?, replays::lab_result_in(&results, mb)?);
    if let (Some(ra), Some(rb)) = (ra, rb) {
        let cpu = records::run::lab_target::this_cpu();
        let target = records::run::lab_target::Target::of(&catalog, &results, args.b, &cpu);
        let target = target.ok().map(|t| t.val_loss);
        let lab = plot::lab_pair([(args.a, &ra), (args.b, &rb)], target);
        plot::term::print(lab.as_slice(), !args.no_plot);
    }
    // The curves come before the commits and the code, which can run to thousands of lines.
    print!("{}", text.body);
    Ok(())
}

/// Colour on a terminal unless NO_COLOR is set.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

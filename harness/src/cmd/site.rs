//! `records site DIR`: the records as a static web site.
use anyhow::Result;
use records::paths;
use records::present::site;
use std::path::PathBuf;
use std::time::Instant;

/// Write the records as a static site (open DIR/index.html; no server, no JavaScript).
#[derive(clap::Args)]
pub struct Args {
    /// Folder to write into (created if missing).
    pub dir: PathBuf,
    /// Replay results to show [default: results/ of the checkout].
    #[arg(long)]
    pub results: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let root = paths::repo_root()?;
    let results = args.results.unwrap_or_else(|| paths::results_dir(&root));
    let start = Instant::now();
    let built = site::build(&root, &results, &args.dir)?;
    println!(
        "wrote {} files to {} in {:.2} s; open {}",
        built.files.len(),
        args.dir.display(),
        start.elapsed().as_secs_f64(),
        args.dir.join("index.html").display()
    );
    Ok(())
}

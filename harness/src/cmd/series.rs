//! `records series`: check the patch series, edit it as a git history, capture a new record.
use anyhow::Context;
use clap::Subcommand;
use records::catalog::{RecordId, Track};
use records::run::series_build::{self, Intermediate};
use records::{paths, present, series};
use std::path::PathBuf;

/// The patch series: every main record's trainer is the checkout with newer patches reversed;
/// every Act 1 step's is #1's with the steps' patches applied.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Prove the series: every tree of every track materializes and every patch re-applies to
    /// give it exactly.
    Check {
        /// Also compile every record's tree, every track's (`cargo check -p trainer`; a full
        /// release build of the first and the newest main record and each track's newest), and
        /// build three trees of upstream records inside the steps (a different three each day)
        /// and have each read its own recipe.
        #[arg(long)]
        build: bool,
        /// With --build: every upstream record's tree, not three (45 builds; the full proof).
        #[arg(long, requires = "build")]
        all: bool,
    },
    /// Write record N's trainer tree to target/records/trees/NN/ (or --out DIR) and print its
    /// path.
    Tree {
        /// Record (see `records list`): 29, or a3 for Act 1's third step; or an upstream record
        /// inside a step (`records list --all`).
        record: RecordId,
        /// Write the tree here instead: a new or empty folder, or one holding a tree written
        /// before (it is replaced).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Write the series as a git repo in DIR, one commit per patch commit, oldest first, to
    /// edit with ordinary git (rebase -i, fixup); `import` writes it back.
    Export {
        /// A new or empty folder for the git repository.
        dir: PathBuf,
        /// The track whose series is exported (only the main track's can be, for now).
        #[arg(long, default_value = "main")]
        track: Track,
    },
    /// Rewrite patches/ and the checkout's trainer files from an exported (edited) repo.
    Import {
        /// The repository `records series export` wrote (and you edited).
        dir: PathBuf,
        /// The track whose series is imported (only the main track's can be, for now).
        #[arg(long, default_value = "main")]
        track: Track,
    },
    /// How much of each upstream record's commit (#30 onward) stays in its technique's own
    /// module: its lines there, in tests and in the shared files (the assembly, the recipe and
    /// registry, routing, the loop), then each shared file's use; ARCHITECTURE.md quotes the
    /// summary.
    Stats {
        /// Only the summary (the commits that stay home and each shared file's use).
        #[arg(long)]
        summary: bool,
        /// Aligned text, or markdown for ARCHITECTURE.md.
        #[arg(long, value_enum, default_value = "text")]
        format: super::FormatArg,
    },
    /// Write the tree ids of a branching track's records (Act 1's) into their manifests
    /// (`[record] tree`), as its patches now give them.
    RecordTrees {
        /// The track: act1. (The main track's ids are written by import and capture.)
        #[arg(long)]
        track: Track,
    },
    /// Make patches/NN.patch for the newest record from this repo's commits REV..HEAD.
    Capture {
        /// The newest main record's number; its patch is written.
        record: RecordId,
        /// The last commit before the record's work.
        #[arg(long, value_name = "REV")]
        since: String,
        /// Replace an existing patch.
        #[arg(long)]
        force: bool,
    },
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let root = paths::repo_root()?;
    match args.command {
        Command::Check { build, all } => {
            let intermediate = match (build, all) {
                (_, true) => Intermediate::All,
                (true, false) => Intermediate::Rotating(3),
                (false, false) => Intermediate::None,
            };
            let proven = series::check::check(&root, &mut |line| println!("{line}"))?;
            if build {
                series_build::build(&root, &proven, intermediate, &mut |line| println!("{line}"))?;
            }
            println!("series ok: {} record(s)", proven.checked.len());
        }
        Command::Tree { record, out: None } => {
            println!("{}", series::materialize(&root, record)?.display())
        }
        Command::Tree { record, out: Some(dir) } => {
            series::materialize_into(&root, record, &dir)?;
            println!("{}", dir.display());
        }
        Command::Export { track, .. } | Command::Import { track, .. } if !track.is_main() => {
            anyhow::bail!(
                "--track {track}: export and import edit the main track's series only, for now; \
                 {}'s patches are git mailboxes of their commits (edit them with git am and git \
                 format-patch), and `records series record-trees --track {track}` records their \
                 trees",
                track.def().name
            )
        }
        Command::Stats { summary, format } => {
            let stats = series::stats::main_track(&root)?;
            if !summary {
                println!("{}", present::stats::commits(&stats, format.into()));
            }
            print!("{}", present::stats::summary(&stats, format.into()));
        }
        Command::RecordTrees { track } => {
            let changed = series::recorded::record_track(&root, track)?;
            match changed.as_slice() {
                [] => println!("every tree id of {} was already recorded", track.def().name),
                _ => println!(
                    "recorded the tree of {} (records/*.toml [record] tree)",
                    records::catalog::show_ids(changed)
                ),
            }
        }
        Command::Export { dir, .. } => {
            let n = series::export::export(&root, &dir)?;
            println!(
                "exported {n} commit(s) to {}; edit with git, then `records series import {}`",
                dir.display(),
                dir.display()
            );
        }
        Command::Import { dir, .. } => {
            let done = series::export::import(&root, &dir)
                .with_context(|| format!("importing {}", dir.display()))?;
            for (record, commits) in &done.patches {
                println!(
                    "wrote {} ({commits} commit(s))",
                    series::patch_path(&root, *record).display()
                );
            }
            println!(
                "{} trainer file(s) of the checkout changed; run `records series check`",
                done.tip_changes
            );
        }
        Command::Capture { record, since, force } => {
            let (path, n) = series::capture::capture(&root, record, &since, force)?;
            println!("wrote {} ({n} commit(s) from {since}..HEAD)", path.display());
            if series::capture::has_uncommitted_trainer_changes(&root)? {
                tracing::info!("note: the checkout has uncommitted trainer changes; they are not in the patch, so they count as part of the parent's tree");
            }
        }
    }
    Ok(())
}

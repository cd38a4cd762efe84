//! `records`: replay the NanoGPT speedrun records as code review.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cmd;

#[derive(Parser)]
#[command(name = "records", version, about = "Replay the NanoGPT speedrun records as code review")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The records, one line each.
    List(cmd::list::Args),
    /// One record's facts and recipe.
    Show(cmd::show::Args),
    /// Build a record's trainer, run it, and print the verdict.
    Replay(cmd::replay::Args),
    /// Corpora: the default corpus, FineWeb shards, tokenizing text.
    Data(cmd::data::Args),
    /// The patch series: check, export, import, capture.
    Series(cmd::series::Args),
    /// What changed between two records: recipe, code and the commits between.
    Diff(cmd::diff::Args),
    /// Walk through one record's change like a pull request.
    Review(cmd::review::Args),
    /// Write the records as a static web site: index, one page per record, diffs, curves.
    Site(cmd::site::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::List(a) => cmd::list::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Data(a) => cmd::data::run(a),
        Command::Series(a) => cmd::series::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Review(a) => cmd::review::run(a),
        Command::Site(a) => cmd::site::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("records: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

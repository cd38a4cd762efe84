//! `records`: replay the NanoGPT speedrun records as code review.
use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod cmd;

#[derive(Parser)]
#[command(name = "records", version, about = "Replay the NanoGPT speedrun records as code review")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Print long output straight to the terminal instead of through $PAGER (less -FRX).
    #[arg(long, global = true)]
    no_pager: bool,
    /// Show the harness's steps (materialize, build, launch, parse) with their times; as
    /// RECORDS_LOG=debug.
    #[arg(short, long, global = true)]
    verbose: bool,
}

#[derive(Subcommand)]
enum Command {
    /// The records, one line each.
    List(cmd::list::Args),
    /// One record's facts and recipe.
    Show(cmd::show::Args),
    /// Build a record's trainer, run it, and print the verdict.
    Replay(cmd::replay::Args),
    /// Replay every upstream record from A to B at one lab budget: what each one bought.
    Walk(cmd::walk::Args),
    /// Profile a few training steps of a record: a Chrome trace and where the time goes.
    Profile(cmd::profile::Args),
    /// Time each record's training step, interleaved round by round: ms/step, tokens/s, ratios.
    Bench(cmd::bench::Args),
    /// Predict a record's step time on a simulated 8×H100 (or H200, RTX 4090) from its recipe.
    Cost(cmd::cost::Args),
    /// Corpora: the default corpus, FineWeb shards, tokenizing text.
    Data(cmd::data::Args),
    /// The patch series: check, export, import, capture.
    Series(cmd::series::Args),
    /// What changed between two records: recipe, code and the commits between.
    Diff(cmd::diff::Args),
    /// Walk through one record's change like a pull request.
    Review(cmd::review::Args),
    /// Judge any training logs (upstream's or your own GPU runs) as a replay is judged.
    Verdict(cmd::verdict::Args),
    /// Write the records as a static web site: index, one page per record, diffs, curves.
    Site(cmd::site::Args),
}

fn main() -> ExitCode {
    records::present::pager::die_quietly_on_closed_pipe();
    let cli = Cli::parse();
    records::logging::init(cli.verbose);
    let paged = matches!(
        &cli.command,
        Command::Show(_)
            | Command::Diff(_)
            | Command::Review(_)
            | Command::Series(cmd::series::Args {
                command: cmd::series::Command::Check { build: false, .. }
            })
    );
    let builds = matches!(
        &cli.command,
        Command::Replay(_)
            | Command::Walk(_)
            | Command::Profile(_)
            | Command::Series(cmd::series::Args {
                command: cmd::series::Command::Check { build: true, .. }
            })
    );
    if builds {
        if let Err(e) = records::run::signals::install() {
            tracing::warn!("records: warning: cannot handle SIGINT/SIGTERM ({e}); an interrupted run may leave temporaries");
        }
    }
    let pager = records::present::pager::start(paged && !cli.no_pager);
    let result = match cli.command {
        Command::List(a) => cmd::list::run(a),
        Command::Show(a) => cmd::show::run(a),
        Command::Replay(a) => cmd::replay::run(a),
        Command::Walk(a) => cmd::walk::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Cost(a) => cmd::cost::run(a),
        Command::Profile(a) => cmd::profile::run(a),
        Command::Data(a) => cmd::data::run(a),
        Command::Series(a) => cmd::series::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::Review(a) => cmd::review::run(a),
        Command::Verdict(a) => cmd::verdict::run(a),
        Command::Site(a) => cmd::site::run(a),
    };
    drop(pager);
    records::run::signals::wait_if_stopping();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("records: error: {}", records::text::error::chain(&e));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every subcommand says what it does and every argument has its help line
    /// (`records help diff`, `records replay --help`).
    #[test]
    fn every_command_and_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            if cmd.get_about().is_none() {
                missing.push(format!("{path} (the command)"));
            }
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if !matches!(id, "help" | "version") && arg.get_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
                // A value enum's values each say what they mean (flags' true/false need not).
                let flag = matches!(arg.get_action(), clap::ArgAction::SetTrue);
                for v in arg.get_possible_values().into_iter().filter(|_| !flag) {
                    if v.get_help().is_none() {
                        missing.push(format!("{path} {id}={}", v.get_name()));
                    }
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "records", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
    }

    #[test]
    fn the_cli_is_consistent() {
        Cli::command().debug_assert();
    }
}

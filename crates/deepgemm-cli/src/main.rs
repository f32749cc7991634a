//! `deepgemm`: the command line of the DeepGEMM kernel compiler.

mod commands;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// DeepGEMM: a GEMM kernel compiler for NVIDIA GPUs. Declare what to compute and what must hold
/// in a `.dgml` file; DeepGEMM models the hardware, chooses a plan, explains why, and generates,
/// compiles, verifies and runs the kernel.
#[derive(Parser)]
#[command(name = "deepgemm", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Check(commands::check::Args),
    Explain(commands::explain::Args),
    Compile(commands::compile::Args),
    Run(commands::run::Args),
    Bench(commands::bench::Args),
    Tune(commands::tune::Args),
    Targets(commands::targets::Args),
}

/// Exit codes: 0 success, 1 a failure while doing the work (GPU, NVRTC, I/O), 2 bad input
/// (a spec, a suite or an argument that is wrong).
pub enum Failure {
    /// Already reported to the user (diagnostics printed).
    BadInput,
    /// Bad input described by a message to print.
    Invalid(String),
    /// A message to print.
    Error(String),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check(args) => commands::check::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Compile(args) => commands::compile::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Tune(args) => commands::tune::run(args),
        Command::Targets(args) => commands::targets::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::BadInput) => ExitCode::from(2),
        Err(Failure::Invalid(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Error(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

//! `deepgemm`: the command line of the DeepGEMM kernel compiler.

mod commands;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// DeepGEMM: a GEMM kernel compiler for NVIDIA GPUs. Declare what to compute and what must hold
/// in a `.dgml` file; DeepGEMM models the hardware, chooses a plan, explains why, and generates,
/// compiles, verifies and runs the kernel.
#[derive(Parser)]
#[command(name = "deepgemm", version, about, long_about = None, after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The exit codes, as `--help` prints them (SPEC.md §3; docs/exit-codes.md).
const EXIT_CODES: &str = "Exit codes:
  0   success
  1   a wrong result or a failed run (GPU, NVRTC, cuBLASLt)
  2   spec errors and infeasible specs (the diagnostics say which line or constraint)
  64  usage: unknown command, option or argument value
  69  no GPU or CUDA driver (commands that run kernels)
  74  I/O: a file or folder that cannot be read or written";

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

/// How a command fails; each kind has its own exit code ([`EXIT_CODES`]).
pub enum Failure {
    /// Bad input already reported to the user (diagnostics printed): exit 2.
    BadInput,
    /// Bad input (a spec, a suite, an infeasible spec) described by a message: exit 2.
    Invalid(String),
    /// A failure while doing the work (GPU, NVRTC, a wrong result): exit 1.
    Error(String),
    /// No GPU or driver to run on: exit 69.
    NoGpu(String),
    /// A file or folder that cannot be read or written: exit 74.
    Io(String),
}

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are not errors; everything else clap rejects is usage.
            let code = if e.use_stderr() { 64 } else { 0 };
            // A closed pipe while printing help has nothing left to tell.
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
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
        Err(Failure::NoGpu(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(69)
        }
        Err(Failure::Io(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(74)
        }
    }
}

/// Writing into a closed pipe (`deepgemm explain x.dgml | head -1`) ends the process quietly, as
/// for any Unix tool: Rust ignores SIGPIPE, which turns every later `println!` into a panic.
#[cfg(unix)]
fn restore_sigpipe() {
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(not(unix))]
fn restore_sigpipe() {}

//! `deepgemm`: the command line of the DeepGEMM kernel compiler.

mod commands;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// DeepGEMM: a GEMM kernel compiler for NVIDIA GPUs. Declare what to compute and what must hold
/// in a `.dgml` file; DeepGEMM models the hardware, chooses a plan, explains why, and generates,
/// compiles, verifies and runs the kernel.
#[derive(Parser)]
#[command(name = "deepgemm", about, long_about = None, after_help = EXIT_CODES)]
#[command(
    disable_version_flag = true,
    override_usage = "deepgemm <COMMAND> [OPTIONS]\n       deepgemm --version"
)]
struct Cli {
    /// Print the version, the git commit it was built from, and the NVRTC and CUDA driver found.
    #[arg(short = 'V', long)]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
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
    Inspect(commands::inspect::Args),
    Run(commands::run::Args),
    Bench(commands::bench::Args),
    Tune(commands::tune::Args),
    Targets(commands::targets::Args),
    Setup(commands::setup::Args),
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
    /// A file that cannot be read, already reported (as JSON, for `--json`): exit 74.
    IoReported,
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
            if code != 0 {
                for hint in std::env::args().skip(1).filter_map(|a| seed_flag_hint(&a)) {
                    eprintln!("hint: {hint}");
                }
            }
            return ExitCode::from(code);
        }
    };
    // clap's own --version prints a fixed string; the libraries found are only known now.
    if cli.version {
        println!("{}", version());
        return ExitCode::SUCCESS;
    }
    let Some(command) = cli.command else {
        let _ = Cli::command()
            .error(ErrorKind::MissingSubcommand, "a command is required")
            .print();
        return ExitCode::from(64);
    };
    let result = match command {
        Command::Check(args) => commands::check::run(args),
        Command::Explain(args) => commands::explain::run(args),
        Command::Compile(args) => commands::compile::run(args),
        Command::Inspect(args) => commands::inspect::run(args),
        Command::Run(args) => commands::run::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Tune(args) => commands::tune::run(args),
        Command::Targets(args) => commands::targets::run(args),
        Command::Setup(args) => commands::setup::run(args),
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
        Err(Failure::IoReported) => ExitCode::from(74),
    }
}

/// The v1 spelling of a flag the seed documents use (`deepgemm --list-targets`, `deepgemm
/// compile --hardware hw.yaml --op x.dgemm --output dir/`), for each one a refused command
/// line holds: clap names only the first, and its did-you-mean cannot know these.
fn seed_flag_hint(arg: &str) -> Option<&'static str> {
    let flag = arg.split('=').next().unwrap_or(arg);
    Some(match flag {
        "--list-targets" => "the presets are listed by `deepgemm targets`",
        "--hardware" | "--target" => {
            "the hardware is named in the spec, inside the kernel: `target h200;` or \
             `hardware \"hw.yaml\";` (`deepgemm targets --show h200 > hw.yaml` writes one)"
        }
        "--op" | "--spec" => {
            "the spec is the command's argument: `deepgemm compile x.dgml -o DIR` (specs are \
             .dgml files)"
        }
        "--output" => "the output folder is `-o DIR` (or `--out DIR`)",
        _ => return None,
    })
}

/// `deepgemm 0.1.0 (commit abc1234)`, then the NVRTC and the driver this process finds (where
/// `compile` and `run` would look), each a version or "not found".
fn version() -> String {
    let nvrtc = match deepgemm_cuda::nvrtc::version() {
        Ok((major, minor)) => format!("{major}.{minor}"),
        Err(_) => "not found".to_string(),
    };
    let driver = match deepgemm_cuda::device::driver_version() {
        // cuDriverGetVersion's 13000 is CUDA 13.0.
        Some(v) => format!("CUDA {}.{} ({v})", v / 1000, v % 1000 / 10),
        None => "not found".to_string(),
    };
    format!(
        "deepgemm {} (commit {})\nnvrtc   {nvrtc}\ndriver  {driver}",
        env!("CARGO_PKG_VERSION"),
        env!("DEEPGEMM_COMMIT")
    )
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

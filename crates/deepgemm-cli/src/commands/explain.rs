//! `deepgemm explain SPEC`: the model's view of a spec — hardware assumptions, candidates,
//! pruning counts, the winner and why; for an infeasible spec, the binding constraint and the
//! least relaxation that admits a plan.

use super::common;
use crate::Failure;
use deepgemm::report::{render_markdown, Analysis, SCHEMA_VERSION};
use deepgemm::search::{self, SearchError};
use std::path::PathBuf;

/// Explain how each kernel of a spec would be planned (no GPU needed). The JSON schema is
/// documented in docs/analysis-json.md; it is the same as `compile`'s analysis.json.
#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  deepgemm explain examples/mlp_up.dgml --top 8\n  \
                        deepgemm explain examples/decode.dgml --json > decode.json"
)]
pub struct Args {
    /// The .dgml file.
    spec: PathBuf,
    /// Candidates to list per shape bucket.
    #[arg(long, default_value_t = 5)]
    top: usize,
    /// Print the analysis as JSON (one object per kernel, in a list) instead of Markdown; a spec
    /// with errors prints them as JSON too.
    #[arg(long)]
    json: bool,
    /// Only this kernel of the file.
    #[arg(long, value_name = "NAME")]
    kernel: Option<String>,
}

pub fn run(args: Args) -> Result<(), Failure> {
    let errors = if args.json {
        common::Errors::Json
    } else {
        common::Errors::Text
    };
    let kernels = common::kernels_of(&args.spec, args.kernel.as_deref(), errors)?;
    let mut infeasible = false;
    let mut json = Vec::new();
    for spec in &kernels {
        match search::search(spec) {
            Ok(result) => {
                let analysis = Analysis::new(spec, &result, args.top);
                if args.json {
                    json.push(serde_json::to_value(&analysis).expect("analysis serializes"));
                } else {
                    println!("{}", render_markdown(&analysis));
                }
            }
            Err(error) => {
                infeasible = true;
                if args.json {
                    json.push(error_json(&spec.name, &error));
                } else {
                    println!("# {} — no plan\n\n{error}\n", spec.name);
                }
            }
        }
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON values serialize")
        );
    }
    if infeasible {
        Err(Failure::BadInput)
    } else {
        Ok(())
    }
}

/// `{"schema_version", "kernel", "error": {"kind", "message", "relaxations"?}}`.
fn error_json(kernel: &str, error: &SearchError) -> serde_json::Value {
    let kind = match error {
        SearchError::InvalidConstraint { .. } => "invalid_constraint",
        SearchError::Contradictory { .. } => "contradictory",
        SearchError::NoBackend { .. } => "no_backend",
        SearchError::Infeasible { .. } => "infeasible",
    };
    let mut body = serde_json::json!({ "kind": kind, "message": error.to_string() });
    if let SearchError::Infeasible { relaxations, .. } = error {
        body["relaxations"] = serde_json::to_value(relaxations).expect("relaxations serialize");
    }
    serde_json::json!({ "schema_version": SCHEMA_VERSION, "kernel": kernel, "error": body })
}

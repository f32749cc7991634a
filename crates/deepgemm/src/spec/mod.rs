//! The `.dgml` language (docs/language.md): lexer → parser → semantic analysis → [`KernelSpec`].
//!
//! ```text
//! source ──lexer.rs──▶ tokens ──parser.rs──▶ ast.rs ──sema.rs──▶ types.rs (SpecFile)
//!                                  every stage reports into diag.rs
//! ```
//!
//! [`parse_str`] / [`parse_file`] run the pipeline and return either the checked kernels or
//! every diagnostic found. [`to_dgml`] prints a spec back (a round trip gives the same
//! `SpecFile`) and [`summary`] gives `deepgemm check`'s normalized view. [`Expr::eval`] is the
//! meaning of epilogue expressions.

mod ast;
mod diag;
mod expr;
mod lexer;
mod parser;
mod print;
mod sema;
mod types;

pub use diag::{Diagnostic, Diagnostics, Span};
pub use expr::erf;
pub(crate) use print::needs_parens;
pub use print::{
    dims, shape_text, summary, summary_record, to_dgml, ConstraintSummary, OperandSummary, Summary,
};
pub use types::*;

use std::path::Path;

/// Parse and check `.dgml` source. `file_name` is used in diagnostics; `hardware "x.yaml"`
/// paths are resolved against `base_dir`.
///
/// ```
/// use deepgemm::spec;
/// let src = "kernel k { target h200;
///              input A: bf16[M, K] row; input B: bf16[K, N] col; output D: bf16[M, N] row;
///              shape { M in 1..=256; N = 4096; K = 4096; } }";
/// let file = spec::parse_str(src, "k.dgml", std::path::Path::new(".")).unwrap();
/// assert_eq!(file.kernels[0].b().layout, spec::Layout::Col);
///
/// let typo = src.replace("h200", "a10");
/// let err = spec::parse_str(&typo, "k.dgml", std::path::Path::new(".")).unwrap_err();
/// assert_eq!((err.items[0].line, err.items[0].col), (1, 19));
/// assert_eq!(err.items[0].message, "unknown target `a10`");
/// assert_eq!(err.items[0].hint.as_deref(), Some("did you mean \"a100\"?"));
/// ```
pub fn parse_str(source: &str, file_name: &str, base_dir: &Path) -> Result<SpecFile, Diagnostics> {
    let mut diags = Vec::new();
    let tokens = lexer::lex(source, &mut diags, file_name);
    let asts = parser::parse(&tokens, source, file_name, &mut diags);
    if asts.is_empty() && diags.is_empty() {
        diags.push(
            Diagnostic::error(file_name, diag::Span::new(0, 0), "no kernel in this file")
                .expected("at least one `kernel NAME { ... }` block"),
        );
    }
    let kernels = sema::analyze(&asts, source, file_name, base_dir, &mut diags);
    if diags.is_empty() {
        return Ok(SpecFile { kernels });
    }
    // Lexing, parsing and analysis each report in source order; `locate` merges them.
    diags.sort_by_key(|d| d.span.map(|s| s.start));
    let truncated = diags.len() >= diag::MAX_DIAGNOSTICS;
    if truncated {
        let last = diags[diag::MAX_DIAGNOSTICS - 1].span.unwrap_or_default();
        diags.truncate(diag::MAX_DIAGNOSTICS);
        diags.push(
            Diagnostic::error(
                file_name,
                last,
                "too many errors; the rest of the file is not checked",
            )
            .hint("fix these and run again"),
        );
    }
    diag::locate(&mut diags, source);
    Err(Diagnostics {
        items: diags,
        truncated,
    })
}

/// Read and parse a spec file; `hardware` paths are relative to the file's directory. A file
/// that cannot be read is one diagnostic.
pub fn parse_file(path: &Path) -> Result<SpecFile, Diagnostics> {
    let name = path.display().to_string();
    let source = std::fs::read_to_string(path).map_err(|e| Diagnostics {
        items: vec![Diagnostic::whole_file(
            &name,
            format!("cannot read {name}: {e}"),
        )],
        truncated: false,
    })?;
    let base_dir = path.parent().unwrap_or(Path::new("."));
    parse_str(&source, &name, base_dir)
}

//! The `.dgml` language: lexer, parser, semantic analysis and diagnostics → [`KernelSpec`].

mod types;

pub use types::*;

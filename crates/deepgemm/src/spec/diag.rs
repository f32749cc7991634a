//! Diagnostics: an error with its place in the source, what was expected and a hint, rendered
//! the way rustc does:
//!
//! ```text
//! error: unknown dtype `bf61`
//!  --> gemm.dgml:3:12
//!   |
//! 3 |   input A: bf61[M, K] row;
//!   |            ^^^^ expected a dtype: f32, tf32, f16, bf16, e4m3, e5m2, i8, i32
//!   |
//!   = hint: did you mean "bf16"?
//! ```
//!
//! A diagnostic carries its own copy of the source line, so rendering needs no source.

use std::fmt;

/// A byte range `[start, end)` in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// Diagnostics beyond this many are dropped (with a note saying so): a file of garbage would
/// otherwise produce one per token.
pub const MAX_DIAGNOSTICS: usize = 100;

/// Source lines longer than this many characters are shown as a window around the error.
const EXCERPT_CHARS: usize = 120;

/// One error in a spec file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based line of the span's start.
    pub line: u32,
    /// 1-based column (in characters) of the span's start.
    pub col: u32,
    pub message: String,
    /// What would have been valid here.
    pub expected: Option<String>,
    /// How to fix it (`did you mean "bf16"?`).
    pub hint: Option<String>,
    /// The text of the line the span starts on (a window of it when the line is long).
    pub source_line: String,
    /// 1-based character position of the caret in `source_line`.
    pub excerpt_col: u32,
    /// Width of the caret underline, in characters (at least 1, clipped to the line).
    pub width: u32,
    /// Byte range in the source; `None` for a diagnostic about the whole file.
    pub span: Option<Span>,
}

impl Diagnostic {
    /// An error at `span`. Its line, column and excerpt are filled in by [`locate`], once for
    /// all diagnostics of a file.
    pub fn error(file: &str, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            file: file.to_string(),
            line: 0,
            col: 0,
            message: message.into(),
            expected: None,
            hint: None,
            source_line: String::new(),
            excerpt_col: 0,
            width: 1,
            span: Some(span),
        }
    }

    /// A diagnostic about the file as a whole (it cannot be read), with no excerpt.
    pub fn whole_file(file: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            line: 1,
            col: 1,
            span: None,
            ..Diagnostic::error(file, Span::default(), message)
        }
    }

    pub fn expected(mut self, what: impl Into<String>) -> Diagnostic {
        self.expected = Some(what.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// Sets a hint only when there is one (the result of [`did_you_mean`]).
    pub fn maybe_hint(self, hint: Option<String>) -> Diagnostic {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }

    /// The rustc-like rendering (see the module docs).
    pub fn render(&self) -> String {
        let mut out = format!("error: {}\n", self.message);
        let line_no = self.line.to_string();
        let pad = " ".repeat(line_no.len());
        // A diagnostic about the whole file (it cannot be read) has no position to show.
        match self.span {
            Some(_) => out += &format!("{pad}--> {}:{}:{}\n", self.file, self.line, self.col),
            None => out += &format!("{pad}--> {}\n", self.file),
        }
        if !self.source_line.is_empty() {
            // Tabs would misalign the caret, so the excerpt shows them as single spaces.
            let excerpt = self.source_line.replace('\t', " ");
            let indent = " ".repeat(self.excerpt_col.saturating_sub(1) as usize);
            let carets = "^".repeat(self.width as usize);
            out += &format!("{pad} |\n{line_no} | {excerpt}\n{pad} | {indent}{carets}");
            if let Some(expected) = &self.expected {
                out += &format!(" expected {expected}");
            }
            out += "\n";
        } else if let Some(expected) = &self.expected {
            out += &format!("{pad} = expected {expected}\n");
        }
        if let Some(hint) = &self.hint {
            out += &format!("{pad} |\n{pad} = hint: {hint}\n");
        }
        out
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// Every error found in one spec file, in source order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostics {
    pub items: Vec<Diagnostic>,
    /// Whether checking stopped at [`MAX_DIAGNOSTICS`]: the last item is then the note saying
    /// so, not an error, and the file may hold more errors than are listed.
    pub truncated: bool,
}

impl Diagnostics {
    /// Whether the file could not be read at all (an I/O error, not a spec error).
    pub fn is_unreadable(&self) -> bool {
        !self.items.is_empty() && self.items.iter().all(|d| d.span.is_none())
    }

    /// All diagnostics, separated by blank lines, with a closing count line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for d in &self.items {
            out += &d.render();
            out += "\n";
        }
        let n = self.items.len() - usize::from(self.truncated);
        let plural = if n == 1 { "" } else { "s" };
        if self.truncated {
            out += &format!(
                "error: could not check the spec: {n} error{plural} shown, and checking stopped \
                 there (the rest of the file may hold more)\n"
            );
        } else {
            out += &format!("error: could not check the spec: {n} error{plural}\n");
        }
        out
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}

/// `did you mean "x"?` for the known name closest to `got`, if one is close enough to be a typo.
pub fn did_you_mean<'a>(got: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(got, known).map(|name| format!("did you mean \"{name}\"?"))
}

/// The known name closest to `got`, when it is close enough to be a typo: at most about one
/// edit in two characters (Damerau-Levenshtein, so swapped letters count once), a shared long
/// prefix (Jaro-Winkler), or an abbreviation (`regs` for `registers`). Case is ignored.
pub fn closest<'a>(got: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lowered = got.to_ascii_lowercase();
    known
        .into_iter()
        .map(|k| {
            let k_lowered = k.to_ascii_lowercase();
            let edits = strsim::normalized_damerau_levenshtein(&lowered, &k_lowered);
            let prefix = strsim::jaro_winkler(&lowered, &k_lowered);
            let short = abbreviates(&lowered, &k_lowered);
            (edits, prefix, short, k)
        })
        .filter(|(edits, prefix, short, _)| *edits >= 0.5 || *prefix >= 0.88 || *short)
        .map(|(edits, prefix, _, k)| (edits, prefix, k))
        .max_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)))
        .map(|(_, _, k)| k)
}

/// Whether `short` is an abbreviation of `long`: the same first letter, at least three letters,
/// all of them found in `long` in order (`regs` in `registers`, `tc` too short to tell).
fn abbreviates(short: &str, long: &str) -> bool {
    if short.len() < 3 || short.len() >= long.len() || short[..1] != long[..1] {
        return false;
    }
    let mut rest = long.chars();
    short.chars().all(|c| rest.any(|l| l == c))
}

/// Fill in line, column and excerpt of every diagnostic from its span, in one pass over the
/// source (diagnostics are sorted by position first).
pub fn locate(diags: &mut [Diagnostic], source: &str) {
    diags.sort_by_key(|d| d.span.map(|s| s.start));
    let bytes = source.as_bytes();
    let (mut scanned, mut line, mut line_start) = (0usize, 1usize, 0usize);
    for d in diags.iter_mut() {
        let Some(span) = d.span else { continue };
        let start = floor_char_boundary(source, span.start.min(source.len()));
        for (i, &b) in bytes[scanned..start].iter().enumerate() {
            if b == b'\n' {
                line += 1;
                line_start = scanned + i + 1;
            }
        }
        scanned = start;
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let text = source[line_start..line_end].trim_end_matches('\r');
        let col = source[line_start..start].chars().count();
        let end = floor_char_boundary(source, span.end.clamp(start, line_end));
        let width = source[start..end].chars().count().max(1);
        let (window, caret) = excerpt(text, col);
        d.line = saturate(line);
        d.col = saturate(col + 1);
        d.width = saturate(width.min(EXCERPT_CHARS));
        d.source_line = window;
        d.excerpt_col = saturate(caret + 1);
    }
}

/// The line itself, or a window of it around character `col` when it is long; and where `col`
/// falls in what is returned.
fn excerpt(line: &str, col: usize) -> (String, usize) {
    let len = line.chars().count();
    if len <= EXCERPT_CHARS {
        return (line.to_string(), col);
    }
    let first = col
        .saturating_sub(EXCERPT_CHARS / 2)
        .min(len - EXCERPT_CHARS);
    let window: String = line.chars().skip(first).take(EXCERPT_CHARS).collect();
    if first == 0 {
        (format!("{window}..."), col)
    } else {
        (format!("...{window}..."), col - first + 3)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn located(src: &str, span: Span) -> Diagnostic {
        let mut d = [Diagnostic::error("x.dgml", span, "m")];
        locate(&mut d, src);
        d[0].clone()
    }

    #[test]
    fn position_and_excerpt() {
        let src = "kernel k {\n  input A: bf61[M, K];\n}";
        let at = src.find("bf61").unwrap();
        let mut d = [
            Diagnostic::error("x.dgml", Span::new(at, at + 4), "unknown dtype `bf61`")
                .expected("a dtype")
                .maybe_hint(did_you_mean("bf61", ["f16", "bf16", "f32"])),
        ];
        locate(&mut d, src);
        assert_eq!((d[0].line, d[0].col, d[0].width), (2, 12, 4));
        assert_eq!(
            d[0].render(),
            "error: unknown dtype `bf61`\n --> x.dgml:2:12\n  |\n2 |   input A: bf61[M, K];\n  \
             |            ^^^^ expected a dtype\n  |\n  = hint: did you mean \"bf16\"?\n"
        );
    }

    #[test]
    fn spans_inside_multibyte_characters_do_not_panic() {
        let d = located("a ∈ b", Span::new(3, 100));
        assert_eq!((d.line, d.col), (1, 3));
    }

    #[test]
    fn long_lines_are_windowed() {
        let src = format!("{}$ tail", "x".repeat(1000));
        let d = located(&src, Span::new(1000, 1001));
        assert_eq!((d.line, d.col), (1, 1001));
        assert!(d.source_line.len() < 200);
        let caret = d.excerpt_col as usize - 1;
        assert_eq!(d.source_line.chars().nth(caret), Some('$'));
    }

    #[test]
    fn suggestions_are_typos_only() {
        assert_eq!(did_you_mean("zzzz", ["bf16", "f32"]), None);
        assert_eq!(closest("bais", ["A", "bias"]), Some("bias"));
        assert_eq!(closest("bais", ["A"]), None);
        assert_eq!(closest("a10", ["a100", "h100"]), Some("a100"));
        assert_eq!(closest("smme", ["smem", "sm90"]), Some("smem"));
        assert_eq!(closest("BF16", ["bf16", "f16"]), Some("bf16"));
        assert_eq!(closest("regs", ["smem", "registers"]), Some("registers"));
        assert_eq!(closest("occ", ["occupancy", "waves"]), Some("occupancy"));
    }
}

//! Tokens → syntax tree, by recursive descent.
//!
//! Error recovery: an error inside an item (`input ...;`, a line of a block) is reported once and
//! the parser skips to the end of that item — the next `;` or the `}` that closes the enclosing
//! block, stepping over nested braces — and goes on, so one run reports every error in a file.
//! A missing `;` before the next item's keyword is reported and parsing continues as if it were
//! there. Every loop consumes at least one token per turn and expression nesting is capped at
//! [`MAX_DEPTH`], so arbitrary bytes cannot make the parser hang or overflow its stack.

use super::ast::*;
use super::diag::{did_you_mean, Diagnostic, Span, MAX_DIAGNOSTICS};
use super::lexer::{Token, TokenKind};
use super::types::{BinaryOp, CBinOp, ConstraintOp, Direction};

/// Deepest expression nesting accepted (parentheses, unary operators, call arguments).
pub const MAX_DEPTH: usize = 64;

/// Most binary operators accepted in one item. Left-associative chains are parsed by loops but
/// build trees as deep as they are long, which later stages walk recursively.
pub const MAX_OPERATORS: usize = 256;

/// The words that start an item inside a kernel.
pub const ITEM_KEYWORDS: [&str; 10] = [
    "target",
    "hardware",
    "input",
    "output",
    "param",
    "accumulate",
    "epilogue",
    "shape",
    "constraints",
    "tiling",
];

/// The error has been reported; the caller skips to a recovery point.
struct Reported;

type PResult<T> = Result<T, Reported>;

pub struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    src: &'a str,
    file: &'a str,
    diags: &'a mut Vec<Diagnostic>,
    depth: usize,
    /// Binary operators in the current item; capped so trees stay shallow enough to walk.
    operators: usize,
    /// A block entry failed to parse since the current kernel started.
    entry_failed: bool,
    /// Where errors past [`MAX_DIAGNOSTICS`] go, unrecorded (the parser is winding down).
    discarded: Diagnostic,
}

/// Parse every `kernel` block of a token stream (which ends with `Eof`).
pub fn parse(
    tokens: &[Token],
    src: &str,
    file: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<KernelAst> {
    let mut parser = Parser {
        tokens,
        pos: 0,
        src,
        file,
        diags,
        depth: 0,
        operators: 0,
        entry_failed: false,
        discarded: Diagnostic::error(file, Span::default(), ""),
    };
    parser.file_items()
}

impl Parser<'_> {
    // ---- token access -------------------------------------------------------------------

    /// Index of the current token. Once [`MAX_DIAGNOSTICS`] errors are reported the parser
    /// sees the end of the file, so that every loop winds down.
    fn index(&self) -> usize {
        if self.diags.len() >= MAX_DIAGNOSTICS {
            self.tokens.len() - 1
        } else {
            self.pos.min(self.tokens.len() - 1)
        }
    }

    fn peek(&self) -> &TokenKind {
        &self.tokens[self.index()].kind
    }

    fn peek_at(&self, offset: usize) -> &TokenKind {
        &self.tokens[(self.index() + offset).min(self.tokens.len() - 1)].kind
    }

    fn span(&self) -> Span {
        self.tokens[self.index()].span
    }

    /// The end of the previous token, where a missing `;` belongs.
    fn just_after_previous(&self) -> Span {
        match self.pos.checked_sub(1) {
            Some(prev) => {
                let end = self.tokens[prev].span.end;
                Span::new(end, end + 1)
            }
            None => self.span(),
        }
    }

    fn bump(&mut self) -> Token {
        let token = self.tokens[self.index()].clone();
        if self.index() < self.tokens.len() - 1 {
            self.pos += 1;
        }
        token
    }

    fn at(&self, kind: &TokenKind) -> bool {
        self.peek() == kind
    }

    fn at_word(&self, word: &str) -> bool {
        matches!(self.peek(), TokenKind::Word(w) if w == word)
    }

    fn eat(&mut self, kind: &TokenKind) -> bool {
        let found = self.at(kind);
        if found {
            self.bump();
        }
        found
    }

    fn eat_word(&mut self, word: &str) -> bool {
        let found = self.at_word(word);
        if found {
            self.bump();
        }
        found
    }

    // ---- errors and recovery ------------------------------------------------------------

    fn error_at(&mut self, span: Span, message: impl Into<String>) -> &mut Diagnostic {
        if self.diags.len() >= MAX_DIAGNOSTICS {
            self.discarded = Diagnostic::error(self.file, span, message);
            return &mut self.discarded;
        }
        self.diags.push(Diagnostic::error(self.file, span, message));
        self.diags.last_mut().expect("just pushed")
    }

    /// "expected X, found Y" at the current token.
    fn unexpected(&mut self, expected: &str) -> Reported {
        let found = self.peek().describe();
        let span = self.span();
        let d = self.error_at(span, format!("expected {expected}, found {found}"));
        d.expected = Some(expected.to_string());
        Reported
    }

    fn expect(&mut self, kind: TokenKind) -> PResult<Token> {
        if self.at(&kind) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&kind.describe()))
        }
    }

    /// `;` ends an item. When it is missing but the next token plainly starts something else
    /// (an item keyword or a closing brace), say so and carry on as if it were there.
    fn expect_semi(&mut self) -> PResult<()> {
        if self.eat(&TokenKind::Semi) {
            return Ok(());
        }
        let starts_next = match self.peek() {
            TokenKind::Word(w) => ITEM_KEYWORDS.contains(&w.as_str()) || w == "kernel",
            TokenKind::RBrace | TokenKind::Eof => true,
            _ => false,
        };
        if starts_next || self.next_line_starts_here() {
            let span = self.just_after_previous();
            let found = self.peek().describe();
            self.error_at(span, format!("missing `;` (found {found})"))
                .expected = Some("`;` to end the statement".to_string());
            Ok(())
        } else {
            Err(self.unexpected("`;`"))
        }
    }

    /// Whether the current token is the first on its line (a line break separates it from the
    /// previous token), which is where a forgotten `;` usually shows.
    fn next_line_starts_here(&self) -> bool {
        let Some(prev) = self.pos.checked_sub(1) else {
            return false;
        };
        let between = &self.src
            [self.tokens[prev].span.end..self.span().start.max(self.tokens[prev].span.end)];
        between.contains('\n') && !matches!(self.peek(), TokenKind::Number { .. })
    }

    /// Skip the rest of a broken item: through the next `;`, or up to the `}` that closes the
    /// enclosing block; a braced group met on the way is skipped whole and ends the item.
    fn recover(&mut self) {
        loop {
            match self.peek() {
                TokenKind::Eof | TokenKind::RBrace => return,
                TokenKind::Semi => {
                    self.bump();
                    return;
                }
                TokenKind::LBrace => {
                    self.skip_braced();
                    return;
                }
                _ => {
                    self.bump();
                }
            }
        }
    }

    /// At `{`: skip to just past the matching `}` (or the end of the file).
    fn skip_braced(&mut self) {
        let mut depth = 0usize;
        loop {
            match self.bump().kind {
                TokenKind::LBrace => depth += 1,
                TokenKind::RBrace => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return;
                    }
                }
                TokenKind::Eof => return,
                _ => {}
            }
        }
    }

    /// Account for one more binary operator in the current item, refusing past
    /// [`MAX_OPERATORS`].
    fn count_operator(&mut self) -> PResult<()> {
        self.operators += 1;
        if self.operators > MAX_OPERATORS {
            let span = self.previous_span();
            self.error_at(span, "expression too long").hint =
                Some(format!("at most {MAX_OPERATORS} operators per statement"));
            return Err(Reported);
        }
        Ok(())
    }

    /// Run `f` one nesting level deeper, refusing past [`MAX_DEPTH`].
    /// `opener` is the token that opens the level (`(`, `-`, `!`), where a refusal points.
    fn nested<T>(&mut self, opener: Span, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_DEPTH {
            self.error_at(opener, "expression nested too deeply").hint = Some(format!(
                "at most {MAX_DEPTH} levels of nesting are accepted"
            ));
            return Err(Reported);
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    // ---- file and kernel ----------------------------------------------------------------

    fn file_items(&mut self) -> Vec<KernelAst> {
        let mut kernels = Vec::new();
        while !self.at(&TokenKind::Eof) {
            if self.at_word("op") {
                // The seed documents' `op NAME { ... }`: said once, then read as the kernel it
                // means, so the errors inside it are reported too.
                let span = self.span();
                let d = self.error_at(span, "`op` is not a `.dgml` item");
                d.expected = Some("`kernel`".to_string());
                d.hint = Some("a kernel is declared `kernel NAME { ... }`".to_string());
            }
            if self.at_word("kernel") || self.at_word("op") {
                if let Some(kernel) = self.kernel() {
                    kernels.push(kernel);
                }
            } else {
                let hint = match self.peek() {
                    TokenKind::Word(w) if ITEM_KEYWORDS.contains(&w.as_str()) => Some(format!(
                        "`{w}` belongs inside a `kernel NAME {{ ... }}` block; each kernel \
                         names its own (`kernel NAME {{ {}; ... }}`)",
                        self.statement_text()
                    )),
                    TokenKind::Word(w) => did_you_mean(w, ["kernel"]),
                    _ => None,
                };
                let _ = self.unexpected("`kernel`");
                if let Some(d) = self.diags.last_mut() {
                    d.hint = hint;
                }
                self.skip_to_next_kernel();
            }
        }
        kernels
    }

    /// The source of the statement starting at the current token, up to its `;` when that is
    /// on the same line, else just the token: what a hint quotes back.
    fn statement_text(&self) -> &str {
        let span = self.span();
        let rest = &self.src[span.start..];
        let line = rest.split('\n').next().unwrap_or_default();
        match line.find(';') {
            Some(end) => line[..end].trim_end(),
            None => &self.src[span.start..span.end],
        }
    }

    fn skip_to_next_kernel(&mut self) {
        while !self.at(&TokenKind::Eof) && !self.at_word("kernel") && !self.at_word("op") {
            if self.at(&TokenKind::LBrace) {
                self.skip_braced();
            } else {
                self.bump();
            }
        }
    }

    /// `kernel NAME { item* }`; `None` when the header is too broken to go on.
    fn kernel(&mut self) -> Option<KernelAst> {
        self.bump(); // `kernel`
        let name = match self.name("a kernel name") {
            Ok(name) => name,
            Err(Reported) => {
                self.skip_to_next_kernel();
                return None;
            }
        };
        let Ok(open) = self.expect(TokenKind::LBrace) else {
            self.skip_to_next_kernel();
            return None;
        };
        let mut items = Vec::new();
        let mut incomplete = false;
        self.entry_failed = false;
        loop {
            let end = match self.peek() {
                TokenKind::RBrace => {
                    self.bump();
                    break;
                }
                TokenKind::Eof => "the end of the file",
                TokenKind::Word(w) if w == "kernel" => "the next `kernel`",
                _ => "",
            };
            if !end.is_empty() {
                let d = self.error_at(open.span, format!("kernel `{}` is not closed", name.text));
                d.expected = Some(format!("a matching `}}` before {end}"));
                incomplete = true;
                break;
            }
            let start = self.pos;
            self.operators = 0;
            match self.item() {
                Ok(item) => items.push(item),
                Err(Reported) => {
                    incomplete = true;
                    self.recover();
                }
            }
            if self.pos == start {
                self.bump();
            }
        }
        Some(KernelAst {
            name,
            items,
            incomplete: incomplete || self.entry_failed,
        })
    }

    fn name(&mut self, what: &str) -> PResult<Name> {
        match self.peek().clone() {
            TokenKind::Word(text) => {
                let span = self.bump().span;
                Ok(Name { text, span })
            }
            _ => Err(self.unexpected(what)),
        }
    }

    fn item(&mut self) -> PResult<Item> {
        let TokenKind::Word(word) = self.peek().clone() else {
            return Err(self.unexpected("a kernel item (`input`, `output`, `target`, ...)"));
        };
        match word.as_str() {
            "target" => {
                self.bump();
                let name = self.name("a target name")?;
                self.expect_semi()?;
                Ok(Item::Target(name))
            }
            "hardware" => {
                self.bump();
                let span = self.span();
                let TokenKind::Str { text: path, closed } = self.peek().clone() else {
                    return Err(self.unexpected("a quoted file name (`\"hw/my_gpu.yaml\"`)"));
                };
                self.bump();
                if !closed {
                    return Err(Reported);
                }
                self.expect_semi()?;
                Ok(Item::Hardware { path, span })
            }
            "input" | "output" => self.operand(),
            "param" => self.param(),
            "accumulate" => {
                self.bump();
                let dtype = self.name("a dtype")?;
                self.expect_semi()?;
                Ok(Item::Accumulate(dtype))
            }
            "epilogue" => {
                self.bump();
                let output = self.name("the output operand's name")?;
                self.expect(TokenKind::Assign)?;
                let expr = self.expr()?;
                self.expect_semi()?;
                Ok(Item::Epilogue { output, expr })
            }
            "shape" => {
                let keyword = self.bump().span;
                Ok(Item::Shape(self.block(Self::shape_item)?, keyword))
            }
            "constraints" => {
                let keyword = self.bump().span;
                Ok(Item::Constraints(self.block(Self::constraint)?, keyword))
            }
            "tiling" => {
                let keyword = self.bump().span;
                Ok(Item::Tiling(self.block(Self::tiling_entry)?, keyword))
            }
            other => {
                let span = self.span();
                let hint = did_you_mean(other, ITEM_KEYWORDS);
                let d = self.error_at(span, format!("unknown kernel item `{other}`"));
                d.expected = Some(format!("one of {}", ITEM_KEYWORDS.join(", ")));
                d.hint = hint;
                Err(Reported)
            }
        }
    }

    /// `{ entry* }`, recovering inside the block after each broken entry.
    fn block<T>(&mut self, entry: fn(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        self.expect(TokenKind::LBrace)?;
        let mut entries = Vec::new();
        loop {
            match self.peek() {
                TokenKind::RBrace => {
                    self.bump();
                    return Ok(entries);
                }
                TokenKind::Eof => {
                    let span = self.span();
                    self.error_at(span, "block is not closed").expected = Some("`}`".to_string());
                    return Ok(entries);
                }
                _ => {}
            }
            let start = self.pos;
            self.operators = 0;
            match entry(self) {
                Ok(e) => entries.push(e),
                Err(Reported) => {
                    self.entry_failed = true;
                    self.recover();
                }
            }
            if self.pos == start {
                self.bump();
            }
        }
    }

    // ---- operands and params ------------------------------------------------------------

    fn operand(&mut self) -> PResult<Item> {
        let direction = if self.bump().kind == TokenKind::Word("input".into()) {
            Direction::Input
        } else {
            Direction::Output
        };
        let name = self.name("an operand name")?;
        self.expect(TokenKind::Colon)?;
        let mut dtype = self.name("a dtype (`bf16`, `f16`, `e4m3`, ...)")?;
        // The seed documents' `tensor<fp16>[M, K]`: reported once the dims are read (the hint
        // shows the whole declaration), and read as the dtype it names meanwhile.
        let tensor = if dtype.text == "tensor" && self.eat(&TokenKind::Lt) {
            let inner = self.name("a dtype")?;
            self.expect(TokenKind::Gt)?;
            let written = dtype.span.to(self.previous_span());
            dtype = Name {
                text: seed_dtype(&inner.text).to_string(),
                span: inner.span,
            };
            Some(written)
        } else {
            None
        };
        let open = self.expect(TokenKind::LBracket)?.span;
        let mut dims = Vec::new();
        if !self.at(&TokenKind::RBracket) {
            loop {
                dims.push(self.dim()?);
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
            }
        }
        let close = self.expect(TokenKind::RBracket)?.span;
        let mut layout = None;
        let mut scale_of = None;
        let mut amax_of = None;
        loop {
            if self.at_word("row") || self.at_word("col") {
                let word = self.name("a layout")?;
                if layout.is_some() {
                    self.error_at(word.span, "layout given twice");
                    return Err(Reported);
                }
                layout = Some(word);
            } else if self.eat_word("scale_of") {
                scale_of = Some(self.name("the name of the operand this scales")?);
            } else if self.eat_word("amax_of") {
                amax_of = Some(self.name("the name of the output this is the amax of")?);
            } else {
                break;
            }
        }
        if let TokenKind::Word(w) = self.peek().clone() {
            if !ITEM_KEYWORDS.contains(&w.as_str()) && w != "kernel" {
                let span = self.span();
                let hint = layout_hint(&w);
                let d = self.error_at(span, format!("unexpected `{w}` after the operand's dims"));
                d.expected =
                    Some("`row`, `col`, `scale_of NAME`, `amax_of NAME` or `;`".to_string());
                d.hint = hint;
                return Err(Reported);
            }
        }
        if let Some(written) = tensor {
            let declared = format!(
                "{}{} {}",
                dtype.text,
                &self.src[open.start..close.end],
                layout.as_ref().map_or("row", |l| l.text.as_str())
            );
            let d = self.error_at(
                written,
                format!("`{}` is not a dtype", &self.src[written.start..written.end]),
            );
            d.expected = Some("a dtype, then the dims and the layout".to_string());
            d.hint = Some(format!("write `{declared}`"));
        }
        self.expect_semi()?;
        Ok(Item::Operand(OperandDecl {
            direction,
            name,
            dtype,
            dims,
            dims_span: open.to(close),
            layout,
            scale_of,
            amax_of,
        }))
    }

    /// `M`, `4096` or `K/128`.
    fn dim(&mut self) -> PResult<DimAst> {
        match self.peek().clone() {
            TokenKind::Word(_) => {
                let name = self.name("a dimension")?;
                if self.eat(&TokenKind::Slash) {
                    let (block, span) = self.int("a block size")?;
                    let whole = name.span.to(span);
                    Ok(DimAst::Div(name, block, whole))
                } else {
                    Ok(DimAst::Name(name))
                }
            }
            TokenKind::Number { .. } => {
                let (v, span) = self.int("a dimension")?;
                Ok(DimAst::Lit(v, span))
            }
            _ => Err(self.unexpected("a dimension (`M`, `N`, `K`, a number or `K/128`)")),
        }
    }

    fn param(&mut self) -> PResult<Item> {
        self.bump();
        let name = self.name("a param name")?;
        self.expect(TokenKind::Colon)?;
        let dtype = self.name("a dtype (`f32`)")?;
        let default = if self.eat(&TokenKind::Assign) {
            let negative = self.eat(&TokenKind::Minus);
            let (value, _) = self.number("a number")?;
            Some(if negative { -value } else { value })
        } else {
            None
        };
        self.expect_semi()?;
        Ok(Item::Param(ParamDecl {
            name,
            dtype,
            default,
        }))
    }

    // ---- numbers ------------------------------------------------------------------------

    /// A number with an optional `KiB` / `MiB` suffix; the value and its span.
    fn number(&mut self, what: &str) -> PResult<(f64, Span)> {
        let (value, _, span) = self.sized_number(what)?;
        Ok((value, span))
    }

    /// A number, its integer value when it has one, and its span.
    fn sized_number(&mut self, what: &str) -> PResult<(f64, Option<u64>, Span)> {
        let TokenKind::Number { value, int } = *self.peek() else {
            return Err(self.unexpected(what));
        };
        let mut span = self.bump().span;
        let unit: u64 = if self.at_word("KiB") {
            1 << 10
        } else if self.at_word("MiB") {
            1 << 20
        } else if let Some((unit, spelled)) = self.misspelled_unit() {
            // Reported, then read as meant so the rest of the line is still checked.
            let at = self.span();
            let d = self.error_at(at, format!("unknown size unit `{spelled}`"));
            d.expected = Some("`KiB` or `MiB` (1024 and 1048576 bytes)".to_string());
            d.hint = Some(format!(
                "write `{} {}`",
                int.map_or(value.to_string(), |i| i.to_string()),
                if unit == 1 << 10 { "KiB" } else { "MiB" }
            ));
            unit
        } else {
            1
        };
        if unit == 1 {
            return Ok((value, int, span));
        }
        span = span.to(self.bump().span);
        let scaled_int = int.and_then(|i| i.checked_mul(unit));
        let scaled = value * unit as f64;
        Ok((scaled, scaled_int, span))
    }

    /// The unit a word after a number means when it is a size spelled another way (`KB`, `kb`,
    /// `kib`, `MB`), with the word. Single letters are not taken: `K` and `M` are shape symbols.
    fn misspelled_unit(&self) -> Option<(u64, String)> {
        let TokenKind::Word(w) = self.peek() else {
            return None;
        };
        let unit = match w.to_ascii_lowercase().as_str() {
            "kb" | "kib" | "kbyte" | "kbytes" => 1 << 10,
            "mb" | "mib" | "mbyte" | "mbytes" => 1 << 20,
            _ => return None,
        };
        Some((unit, w.clone()))
    }

    /// A non-negative integer literal (sizes allowed: `64 KiB`).
    fn int(&mut self, what: &str) -> PResult<(u64, Span)> {
        let (value, int, span) = self.sized_number(what)?;
        match int {
            Some(v) => Ok((v, span)),
            None => {
                let d = self.error_at(span, format!("expected an integer, found `{value}`"));
                d.expected = Some(what.to_string());
                Err(Reported)
            }
        }
    }

    /// `{ v1, v2, ... }` of integers (the `{` is current).
    fn int_set(&mut self) -> PResult<Vec<u64>> {
        self.expect(TokenKind::LBrace)?;
        let mut values = Vec::new();
        if !self.at(&TokenKind::RBrace) {
            loop {
                values.push(self.int("an integer")?.0);
                if !self.eat(&TokenKind::Comma) {
                    break;
                }
                if self.at(&TokenKind::RBrace) {
                    break;
                }
            }
        }
        self.expect(TokenKind::RBrace)?;
        Ok(values)
    }

    /// `..=`, with a clear word for the exclusive `..` people may try.
    fn range_dots(&mut self) -> PResult<()> {
        if self.at(&TokenKind::DotDot) {
            let span = self.span();
            let d = self.error_at(span, "ranges are inclusive and written `..=`");
            d.expected = Some("`..=`".to_string());
            d.hint = Some("write `lo..=hi`, e.g. `M in 1..=8192`".to_string());
            return Err(Reported);
        }
        self.expect(TokenKind::DotDotEq).map(|_| ())
    }

    // ---- shape, constraints, tiling -----------------------------------------------------

    fn shape_item(&mut self) -> PResult<ShapeItem> {
        // `fallback` is a keyword only here, before a word (not `=` or `in`).
        if self.at_word("fallback") && matches!(self.peek_at(1), TokenKind::Word(_)) {
            self.bump();
            let mode = self.name("a fallback: `nearest`")?;
            self.expect_semi()?;
            return Ok(ShapeItem::Fallback(mode));
        }
        if self.at_word("fallback") && matches!(self.peek_at(1), TokenKind::Semi) {
            let span = self.span();
            let d = self.error_at(span, "`fallback` needs a mode");
            d.expected = Some("a fallback: `nearest`".to_string());
            d.hint = Some("`fallback nearest;`".to_string());
            return Err(Reported);
        }
        self.shape_entry().map(ShapeItem::Dim)
    }

    fn shape_entry(&mut self) -> PResult<ShapeEntry> {
        let sym = self.name("`M`, `N` or `K`")?;
        let assign = self.eat(&TokenKind::Assign);
        let is_in = !assign && self.eat_word("in");
        let start = self.span();
        let domain = if assign {
            DomainAst::Fixed(self.int("a size")?.0)
        } else if is_in {
            if self.at(&TokenKind::LBrace) {
                DomainAst::Set(self.int_set()?)
            } else {
                let lo = self.int("the first value of a range")?.0;
                self.range_dots()?;
                let hi = self.int("the last value of the range")?.0;
                DomainAst::Range { lo, hi }
            }
        } else {
            return Err(self.unexpected("`= value`, `in lo..=hi` or `in {v1, v2, ...}`"));
        };
        let span = start.to(self.previous_span());
        self.expect_semi()?;
        Ok(ShapeEntry { sym, domain, span })
    }

    /// The span of the token just consumed.
    fn previous_span(&self) -> Span {
        self.pos
            .checked_sub(1)
            .map_or(self.span(), |prev| self.tokens[prev].span)
    }

    fn constraint(&mut self) -> PResult<ConstraintAst> {
        let start = self.span();
        let lhs = self.arith()?;
        let op = match self.peek() {
            TokenKind::Colon => {
                // The seed documents' `use_hmma: true;` settings: a hint with the comparison.
                let name = self.src[start.start..self.previous_span().end].to_string();
                let colon = self.span();
                self.bump();
                let value_start = self.span();
                self.arith()?;
                let value = self.src[value_start.start..self.previous_span().end].to_string();
                let d = self.error_at(colon, "`:` is not a constraint operator");
                d.expected = Some("`<=`, `>=`, `==` or `~`".to_string());
                d.hint = Some(format!(
                    "constraints are comparisons: write `{}`",
                    seed_constraint(&name, &value)
                ));
                return Err(Reported);
            }
            TokenKind::Le => ConstraintOp::Le,
            TokenKind::Ge => ConstraintOp::Ge,
            TokenKind::EqEq => ConstraintOp::Eq,
            TokenKind::Tilde => ConstraintOp::Near,
            TokenKind::Lt | TokenKind::Gt | TokenKind::Assign => {
                let span = self.span();
                let found = self.peek().describe();
                let d = self.error_at(span, format!("{found} is not a constraint operator"));
                d.expected = Some("`<=`, `>=`, `==` or `~`".to_string());
                d.hint =
                    Some("constraints are `<=` / `>=` / `==` (hard) or `~` (soft)".to_string());
                return Err(Reported);
            }
            _ => return Err(self.unexpected("`<=`, `>=`, `==` or `~`")),
        };
        self.bump();
        let rhs = self.arith()?;
        self.expect_semi()?;
        Ok(ConstraintAst { lhs, op, rhs })
    }

    fn tiling_entry(&mut self) -> PResult<TilingEntry> {
        let var = self.name("a tile variable (`TILE_M`, `STAGES`, ...)")?;
        if !self.eat_word("in") {
            return Err(self.unexpected("`in`"));
        }
        let start = self.span();
        let values = match self.peek() {
            TokenKind::LBracket => {
                self.bump();
                let lo = self.int("the interval's low end")?.0;
                self.expect(TokenKind::Comma)?;
                let hi = self.int("the interval's high end")?.0;
                self.expect(TokenKind::RBracket)?;
                TileValuesAst::Interval { lo, hi }
            }
            TokenKind::LBrace => TileValuesAst::Set(self.int_set()?),
            TokenKind::Number { .. } => {
                let lo = self.int("the first value of a range")?.0;
                self.range_dots()?;
                let hi = self.int("the last value of the range")?.0;
                let step = if self.eat_word("step") {
                    self.int("a step")?.0
                } else {
                    1
                };
                TileValuesAst::Stepped { lo, hi, step }
            }
            _ => return Err(self.unexpected("`[lo, hi]`, `{v1, v2, ...}` or `lo..=hi`")),
        };
        let span = start.to(self.previous_span());
        // `TILE_M ∈ [16, 256] ∧ TILE_M % 16 == 0` (the seed documents' form): the domain and
        // a condition on it, which is what `where` says.
        let condition =
            if self.eat_word("where") || self.eat_word("and") || self.eat(&TokenKind::AndAnd) {
                Some(self.condition()?)
            } else {
                None
            };
        self.expect_semi()?;
        Ok(TilingEntry {
            var,
            values,
            span,
            condition,
        })
    }

    // ---- constraint / condition expressions ---------------------------------------------
    //
    //   condition := conj (("||" | "or") conj)*
    //   conj      := neg (("&&" | "and" | "∧") neg)*
    //   neg       := "!" neg | compare
    //   compare   := arith (("<" | "<=" | ">" | ">=" | "==" | "!=") arith)?
    //   arith     := term (("+" | "-") term)*
    //   term      := unary (("*" | "/" | "%") unary)*
    //   unary     := "-" unary | atom
    //   atom      := number [KiB|MiB] | name | "(" condition ")"

    fn condition(&mut self) -> PResult<CAst> {
        let mut lhs = self.conj()?;
        while self.eat(&TokenKind::OrOr) || self.eat_word("or") {
            let rhs = self.conj()?;
            self.count_operator()?;
            lhs = cbin(CBinOp::Or, lhs, rhs);
        }
        Ok(lhs)
    }

    fn conj(&mut self) -> PResult<CAst> {
        let mut lhs = self.neg()?;
        while self.eat(&TokenKind::AndAnd) || self.eat_word("and") {
            let rhs = self.neg()?;
            self.count_operator()?;
            lhs = cbin(CBinOp::And, lhs, rhs);
        }
        Ok(lhs)
    }

    fn neg(&mut self) -> PResult<CAst> {
        if self.at(&TokenKind::Bang) {
            let start = self.bump().span;
            let inner = self.nested(start, Self::neg)?;
            let span = start.to(inner.span);
            return Ok(CAst {
                kind: CAstKind::Not(Box::new(inner)),
                span,
            });
        }
        let lhs = self.arith()?;
        let op = match self.peek() {
            TokenKind::Lt => CBinOp::Lt,
            TokenKind::Le => CBinOp::Le,
            TokenKind::Gt => CBinOp::Gt,
            TokenKind::Ge => CBinOp::Ge,
            TokenKind::EqEq => CBinOp::Eq,
            TokenKind::NotEq => CBinOp::Ne,
            _ => return Ok(lhs),
        };
        self.bump();
        let rhs = self.arith()?;
        self.count_operator()?;
        Ok(cbin(op, lhs, rhs))
    }

    fn arith(&mut self) -> PResult<CAst> {
        let mut lhs = self.cterm()?;
        loop {
            let op = match self.peek() {
                TokenKind::Plus => CBinOp::Add,
                TokenKind::Minus => CBinOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.cterm()?;
            self.count_operator()?;
            lhs = cbin(op, lhs, rhs);
        }
    }

    fn cterm(&mut self) -> PResult<CAst> {
        let mut lhs = self.cunary()?;
        loop {
            let op = match self.peek() {
                TokenKind::Star => CBinOp::Mul,
                TokenKind::Slash => CBinOp::Div,
                TokenKind::Percent => CBinOp::Mod,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.cunary()?;
            self.count_operator()?;
            lhs = cbin(op, lhs, rhs);
        }
    }

    fn cunary(&mut self) -> PResult<CAst> {
        if self.at(&TokenKind::Minus) {
            let start = self.bump().span;
            let inner = self.nested(start, Self::cunary)?;
            let span = start.to(inner.span);
            return Ok(CAst {
                kind: CAstKind::Neg(Box::new(inner)),
                span,
            });
        }
        match self.peek().clone() {
            TokenKind::Number { .. } => {
                let (value, span) = self.number("a number")?;
                Ok(CAst {
                    kind: CAstKind::Number(value),
                    span,
                })
            }
            TokenKind::Word(text) => {
                let span = self.bump().span;
                Ok(CAst {
                    kind: CAstKind::Name(text),
                    span,
                })
            }
            TokenKind::LParen => {
                let open = self.bump().span;
                let mut inner = self.nested(open, Self::condition)?;
                let close = self.expect(TokenKind::RParen)?.span;
                inner.span = open.to(close);
                Ok(inner)
            }
            _ => Err(self.unexpected("a number, an observable or a tile variable")),
        }
    }

    // ---- epilogue expressions -----------------------------------------------------------
    //
    //   expr    := product (("+" | "-") product)*
    //   product := unary (("*" | "/") unary)*
    //   unary   := "-" unary | primary
    //   primary := number | "cast" "<" dtype ">" "(" expr ")" | name "(" args ")" | name
    //            | "(" expr ")"

    fn expr(&mut self) -> PResult<AExpr> {
        let mut lhs = self.product()?;
        loop {
            let op = match self.peek() {
                TokenKind::Plus => BinaryOp::Add,
                TokenKind::Minus => BinaryOp::Sub,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.product()?;
            self.count_operator()?;
            lhs = abin(op, lhs, rhs);
        }
    }

    fn product(&mut self) -> PResult<AExpr> {
        let mut lhs = self.unary()?;
        loop {
            let op = match self.peek() {
                TokenKind::Star => BinaryOp::Mul,
                TokenKind::Slash => BinaryOp::Div,
                _ => return Ok(lhs),
            };
            self.bump();
            let rhs = self.unary()?;
            self.count_operator()?;
            lhs = abin(op, lhs, rhs);
        }
    }

    fn unary(&mut self) -> PResult<AExpr> {
        if self.at(&TokenKind::Minus) {
            let start = self.bump().span;
            let inner = self.nested(start, Self::unary)?;
            let span = start.to(inner.span);
            return Ok(AExpr {
                kind: AExprKind::Neg(Box::new(inner)),
                span,
            });
        }
        self.primary()
    }

    fn primary(&mut self) -> PResult<AExpr> {
        match self.peek().clone() {
            TokenKind::Number { .. } => {
                let (value, span) = self.number("a number")?;
                Ok(AExpr {
                    kind: AExprKind::Number(value),
                    span,
                })
            }
            TokenKind::Word(w) if w == "cast" && *self.peek_at(1) == TokenKind::Lt => {
                let start = self.bump().span;
                self.bump(); // `<`
                let dtype = self.name("a dtype")?;
                self.expect(TokenKind::Gt)?;
                self.expect(TokenKind::LParen)?;
                let arg = self.nested(start, Self::expr)?;
                let close = self.expect(TokenKind::RParen)?.span;
                Ok(AExpr {
                    kind: AExprKind::Cast(dtype, Box::new(arg)),
                    span: start.to(close),
                })
            }
            TokenKind::Word(_) => {
                let name = self.name("a name")?;
                if !self.eat(&TokenKind::LParen) {
                    return Ok(AExpr {
                        span: name.span,
                        kind: AExprKind::Var(name.text),
                    });
                }
                let mut args = Vec::new();
                if !self.at(&TokenKind::RParen) {
                    loop {
                        args.push(self.nested(name.span, Self::expr)?);
                        if !self.eat(&TokenKind::Comma) {
                            break;
                        }
                    }
                }
                let close = self.expect(TokenKind::RParen)?.span;
                Ok(AExpr {
                    span: name.span.to(close),
                    kind: AExprKind::Call(name, args),
                })
            }
            TokenKind::LParen => {
                let open = self.bump().span;
                let mut inner = self.nested(open, Self::expr)?;
                let close = self.expect(TokenKind::RParen)?.span;
                inner.span = open.to(close);
                Ok(inner)
            }
            _ => Err(self.unexpected("an expression (`acc`, a name, a number, a function call)")),
        }
    }
}

fn cbin(op: CBinOp, lhs: CAst, rhs: CAst) -> CAst {
    let span = lhs.span.to(rhs.span);
    CAst {
        kind: CAstKind::Bin(op, Box::new(lhs), Box::new(rhs)),
        span,
    }
}

fn abin(op: BinaryOp, lhs: AExpr, rhs: AExpr) -> AExpr {
    let span = lhs.span.to(rhs.span);
    AExpr {
        kind: AExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
        span,
    }
}

/// The hint for a word where a layout goes: `row` or `col` for their long spellings
/// (`rowmajor`, `row_major`, `column_major`), which are too far from the short ones for
/// [`did_you_mean`], else the closest of the words allowed there.
fn layout_hint(word: &str) -> Option<String> {
    let lowered = word.to_ascii_lowercase();
    let layout = if lowered.starts_with("row") {
        "row"
    } else if lowered.starts_with("col") {
        "col"
    } else {
        return did_you_mean(word, ["row", "col", "scale_of", "amax_of"]);
    };
    Some(format!(
        "did you mean \"{layout}\"? (layouts are `row` and `col`)"
    ))
}

/// The `.dgml` dtype for a seed document's element type name (`fp16` in `tensor<fp16>`); a name
/// it does not know is kept, for the dtype check to report.
fn seed_dtype(name: &str) -> &str {
    match name {
        "fp16" | "float16" | "half" => "f16",
        "fp32" | "float32" | "float" => "f32",
        "bfloat16" => "bf16",
        "fp8" | "fp8_e4m3" | "float8_e4m3" => "e4m3",
        "fp8_e5m2" | "float8_e5m2" => "e5m2",
        "int8" => "i8",
        "int32" => "i32",
        other => other,
    }
}

/// The v1 comparison for a seed document's `name: value` setting (`use_hmma: true` is
/// `use_tensor_cores == 1`, `sm_mem_limit: 96` is `smem <= 96 KiB`, `X_min: v` is `X >= v`).
fn seed_constraint(name: &str, value: &str) -> String {
    let flag = match value {
        "true" => "1",
        "false" => "0",
        other => other,
    };
    match name {
        "use_hmma" | "use_tensor_cores" | "use_tensor_core" => {
            format!("use_tensor_cores == {flag}")
        }
        "sm_mem_limit" | "smem_limit" | "shared_mem_limit" | "smem" => {
            let is_number = value.parse::<f64>().is_ok();
            format!("smem <= {value}{}", if is_number { " KiB" } else { "" })
        }
        "register_usage" | "register_limit" | "registers" => format!("registers <= {value}"),
        _ => {
            if let Some(base) = name.strip_suffix("_min") {
                format!("{base} >= {value}")
            } else if let Some(base) = name
                .strip_suffix("_max")
                .or_else(|| name.strip_suffix("_limit"))
            {
                format!("{base} <= {value}")
            } else {
                format!("{name} == {flag}")
            }
        }
    }
}

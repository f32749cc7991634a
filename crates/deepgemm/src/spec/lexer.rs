//! Bytes → tokens. The lexer never fails as a whole: a character it does not know, an
//! unterminated string or comment becomes a diagnostic and lexing goes on past it, so the parser
//! still sees (and reports errors in) the rest of the file.
//!
//! Unicode spellings are folded here: `∈` lexes as the word `in`, `∧` as `and`, `≤` / `≥` as
//! `<=` / `>=`. Comments (`//` to the end of the line, `/* ... */`, not nested) are skipped.

use super::diag::{Diagnostic, Span, MAX_DIAGNOSTICS};

#[derive(Debug, Clone, PartialEq)]
pub enum TokenKind {
    /// A name or keyword; keywords are contextual (`shape` may still name an operand).
    Word(String),
    /// A decimal number. `int` is set when it was written as plain digits and fits a u64.
    Number {
        value: f64,
        int: Option<u64>,
    },
    /// `"..."`; `closed` is false for an unterminated string (already reported).
    Str {
        text: String,
        closed: bool,
    },
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    LParen,
    RParen,
    Comma,
    Semi,
    Colon,
    /// `=`
    Assign,
    EqEq,
    NotEq,
    Le,
    Ge,
    Lt,
    Gt,
    Tilde,
    Plus,
    Minus,
    Star,
    Slash,
    Percent,
    Bang,
    AndAnd,
    OrOr,
    /// `..=`
    DotDotEq,
    /// `..` (never valid: ranges are inclusive; lexed so the parser can say so)
    DotDot,
    Eof,
}

impl TokenKind {
    /// How the token reads in a message: `` `;` ``, `` word `foo` ``, `number 3`.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Word(w) => format!("`{w}`"),
            TokenKind::Number { value, .. } => format!("number `{value}`"),
            TokenKind::Str { text, .. } => format!("string \"{text}\""),
            TokenKind::Eof => "end of file".to_string(),
            other => format!("`{}`", other.punct_text()),
        }
    }

    fn punct_text(&self) -> &'static str {
        match self {
            TokenKind::LBrace => "{",
            TokenKind::RBrace => "}",
            TokenKind::LBracket => "[",
            TokenKind::RBracket => "]",
            TokenKind::LParen => "(",
            TokenKind::RParen => ")",
            TokenKind::Comma => ",",
            TokenKind::Semi => ";",
            TokenKind::Colon => ":",
            TokenKind::Assign => "=",
            TokenKind::EqEq => "==",
            TokenKind::NotEq => "!=",
            TokenKind::Le => "<=",
            TokenKind::Ge => ">=",
            TokenKind::Lt => "<",
            TokenKind::Gt => ">",
            TokenKind::Tilde => "~",
            TokenKind::Plus => "+",
            TokenKind::Minus => "-",
            TokenKind::Star => "*",
            TokenKind::Slash => "/",
            TokenKind::Percent => "%",
            TokenKind::Bang => "!",
            TokenKind::AndAnd => "&&",
            TokenKind::OrOr => "||",
            TokenKind::DotDotEq => "..=",
            TokenKind::DotDot => "..",
            TokenKind::Word(_)
            | TokenKind::Number { .. }
            | TokenKind::Str { .. }
            | TokenKind::Eof => "",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

/// Lex the whole source. The token list always ends with `Eof`.
pub fn lex(source: &str, diags: &mut Vec<Diagnostic>, file: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        src: source,
        pos: 0,
        tokens: Vec::new(),
    };
    lexer.run(diags, file);
    lexer.tokens
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    tokens: Vec<Token>,
}

impl Lexer<'_> {
    fn peek(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.src[self.pos..].chars().nth(offset)
    }

    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn push(&mut self, kind: TokenKind, start: usize) {
        self.tokens.push(Token {
            kind,
            span: Span::new(start, self.pos),
        });
    }

    fn run(&mut self, diags: &mut Vec<Diagnostic>, file: &str) {
        while let Some(c) = self.peek() {
            let start = self.pos;
            // A byte-order mark, as some editors write, counts as whitespace.
            if c.is_whitespace() || c == '\u{feff}' {
                self.pos += c.len_utf8();
            } else if self.rest().starts_with("//") {
                self.pos = self
                    .rest()
                    .find('\n')
                    .map_or(self.src.len(), |i| self.pos + i);
            } else if self.rest().starts_with("/*") {
                match self.rest()[2..].find("*/") {
                    Some(i) => self.pos += 2 + i + 2,
                    None => {
                        diags.push(
                            Diagnostic::error(
                                file,
                                Span::new(start, start + 2),
                                "unterminated block comment",
                            )
                            .expected("`*/` before the end of the file")
                            .hint("block comments do not nest; close this one with `*/`"),
                        );
                        self.pos = self.src.len();
                    }
                }
            } else if c.is_ascii_alphabetic() || c == '_' {
                let len = self
                    .rest()
                    .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                    .unwrap_or(self.rest().len());
                self.pos += len;
                let word = self.src[start..self.pos].to_string();
                self.push(TokenKind::Word(word), start);
            } else if c.is_ascii_digit() {
                self.number(diags, file);
            } else if c == '"' {
                self.string(diags, file);
            } else if let Some((kind, len)) = self.punct() {
                self.pos += len;
                self.push(kind, start);
            } else {
                self.unknown_characters(diags, file);
            }
            if diags.len() >= MAX_DIAGNOSTICS {
                break;
            }
        }
        let end = self.src.len();
        self.tokens.push(Token {
            kind: TokenKind::Eof,
            span: Span::new(end, end),
        });
    }

    /// A run of characters the language does not use, reported once.
    fn unknown_characters(&mut self, diags: &mut Vec<Diagnostic>, file: &str) {
        let start = self.pos;
        while let Some(c) = self.peek() {
            let known = c.is_whitespace()
                || c == '\u{feff}'
                || c.is_ascii_alphanumeric()
                || c == '_'
                || c == '"'
                || (self.pos > start && self.punct().is_some());
            if known && self.pos > start {
                break;
            }
            self.pos += c.len_utf8();
        }
        let run = &self.src[start..self.pos];
        let message = if run.chars().count() == 1 {
            format!("unexpected character `{}`", run.escape_debug())
        } else {
            format!("unexpected characters `{}`", run.escape_debug())
        };
        diags.push(
            Diagnostic::error(file, Span::new(start, self.pos), message)
                .hint("`.dgml` uses ASCII punctuation plus `∈ ∧ ≤ ≥`"),
        );
    }

    /// Digits, an optional fraction (not when `..` follows: `1..=8`) and an optional exponent.
    fn number(&mut self, diags: &mut Vec<Diagnostic>, file: &str) {
        let start = self.pos;
        let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        self.pos += digits(self.rest());
        let mut is_int = true;
        if self.peek() == Some('.') && self.peek_at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            self.pos += digits(self.rest());
            is_int = false;
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let signed = matches!(self.peek_at(1), Some('+' | '-'));
            let first_digit = if signed { 2 } else { 1 };
            if self
                .peek_at(first_digit)
                .is_some_and(|c| c.is_ascii_digit())
            {
                self.pos += first_digit;
                self.pos += digits(self.rest());
                is_int = false;
            }
        }
        let text = &self.src[start..self.pos];
        let value: f64 = text.parse().unwrap_or(f64::INFINITY);
        if !value.is_finite() {
            diags.push(Diagnostic::error(
                file,
                Span::new(start, self.pos),
                format!("number `{text}` is too large"),
            ));
            self.push(
                TokenKind::Number {
                    value: 0.0,
                    int: None,
                },
                start,
            );
            return;
        }
        let int = if is_int { text.parse().ok() } else { None };
        self.push(TokenKind::Number { value, int }, start);
    }

    /// `"..."` on one line, no escapes (strings only name files).
    fn string(&mut self, diags: &mut Vec<Diagnostic>, file: &str) {
        let start = self.pos;
        let body = &self.rest()[1..];
        match body.find(['"', '\n']) {
            Some(i) if body[i..].starts_with('"') => {
                let text = body[..i].to_string();
                self.pos += 1 + i + 1;
                self.push(TokenKind::Str { text, closed: true }, start);
            }
            found => {
                let text_len = found.unwrap_or(body.len());
                let text = body[..text_len].to_string();
                self.pos += 1 + text_len;
                diags.push(
                    Diagnostic::error(file, Span::new(start, start + 1), "unterminated string")
                        .expected("a closing `\"` on the same line"),
                );
                self.push(
                    TokenKind::Str {
                        text,
                        closed: false,
                    },
                    start,
                );
            }
        }
    }

    fn punct(&self) -> Option<(TokenKind, usize)> {
        const MULTI: [(&str, TokenKind); 8] = [
            ("..=", TokenKind::DotDotEq),
            ("..", TokenKind::DotDot),
            ("==", TokenKind::EqEq),
            ("!=", TokenKind::NotEq),
            ("<=", TokenKind::Le),
            (">=", TokenKind::Ge),
            ("&&", TokenKind::AndAnd),
            ("||", TokenKind::OrOr),
        ];
        for (text, kind) in MULTI {
            if self.rest().starts_with(text) {
                return Some((kind, text.len()));
            }
        }
        let c = self.peek()?;
        let kind = match c {
            '{' => TokenKind::LBrace,
            '}' => TokenKind::RBrace,
            '[' => TokenKind::LBracket,
            ']' => TokenKind::RBracket,
            '(' => TokenKind::LParen,
            ')' => TokenKind::RParen,
            ',' => TokenKind::Comma,
            ';' => TokenKind::Semi,
            ':' => TokenKind::Colon,
            '=' => TokenKind::Assign,
            '<' => TokenKind::Lt,
            '>' => TokenKind::Gt,
            '~' => TokenKind::Tilde,
            '+' => TokenKind::Plus,
            '-' => TokenKind::Minus,
            '*' => TokenKind::Star,
            '/' => TokenKind::Slash,
            '%' => TokenKind::Percent,
            '!' => TokenKind::Bang,
            '≤' => TokenKind::Le,
            '≥' => TokenKind::Ge,
            '∈' => TokenKind::Word("in".to_string()),
            '∧' => TokenKind::Word("and".to_string()),
            _ => return None,
        };
        Some((kind, c.len_utf8()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        let mut diags = Vec::new();
        let tokens = lex(src, &mut diags, "t.dgml");
        assert!(diags.is_empty(), "{diags:?}");
        tokens.into_iter().map(|t| t.kind).collect()
    }

    fn word(w: &str) -> TokenKind {
        TokenKind::Word(w.to_string())
    }

    fn int(v: u64) -> TokenKind {
        TokenKind::Number {
            value: v as f64,
            int: Some(v),
        }
    }

    #[test]
    fn ranges_are_not_fractions() {
        assert_eq!(
            kinds("1..=8"),
            vec![int(1), TokenKind::DotDotEq, int(8), TokenKind::Eof]
        );
    }

    #[test]
    fn floats_and_exponents() {
        assert_eq!(
            kinds("0.80 1e-3 2e"),
            vec![
                TokenKind::Number {
                    value: 0.8,
                    int: None
                },
                TokenKind::Number {
                    value: 1e-3,
                    int: None
                },
                int(2),
                word("e"),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn unicode_operators_fold_to_ascii() {
        assert_eq!(
            kinds("M ∈ a ∧ b ≤ c ≥ d"),
            vec![
                word("M"),
                word("in"),
                word("a"),
                word("and"),
                word("b"),
                TokenKind::Le,
                word("c"),
                TokenKind::Ge,
                word("d"),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn comments_and_byte_order_marks_are_skipped() {
        assert_eq!(
            kinds("\u{feff}a // x\n/* y\n z */ b"),
            vec![word("a"), word("b"), TokenKind::Eof]
        );
    }

    #[test]
    fn bad_input_is_reported_and_skipped() {
        let mut diags = Vec::new();
        let tokens = lex("a $$ b \"open\n/* never", &mut diags, "t.dgml");
        assert_eq!(diags.len(), 3, "{diags:?}");
        assert_eq!(tokens.first().map(|t| &t.kind), Some(&word("a")));
        assert_eq!(tokens.last().map(|t| &t.kind), Some(&TokenKind::Eof));
    }
}

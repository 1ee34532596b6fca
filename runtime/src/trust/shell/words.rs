//! The shell parser's words and tokens: quotes, escapes, `$'…'` strings,
//! expansions (`$x`, `${…}`, `$(…)`, `$((…))`, backticks) and the operators
//! between words. `Parser`'s grammar calls these; a command
//! substitution calls back into the grammar one level deeper.

use super::{ParseError, Parser, RedirectKind, RedirectOp, Stop, Token, Word};

/// A word being read: its bytes so far, and whether any part of it was
/// quoted or is an expansion kept as source text.
#[derive(Default)]
pub(super) struct WordBuf {
    text: Vec<u8>,
    dynamic: bool,
    quoted: bool,
    pattern: bool,
    started: bool,
}

impl WordBuf {
    fn push(&mut self, b: u8) {
        self.text.push(b);
        self.started = true;
    }
    fn push_src(&mut self, s: &[u8]) {
        self.text.extend_from_slice(s);
        self.started = true;
        self.dynamic = true;
    }
    fn finish(self) -> Word {
        Word {
            text: String::from_utf8_lossy(&self.text).into_owned(),
            dynamic: self.dynamic,
            quoted: self.quoted,
            pattern: self.pattern,
        }
    }
}

impl Parser<'_> {
    pub(super) fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    pub(super) fn peek_after_spaces(&self, from: usize) -> Option<u8> {
        let mut i = self.pos + from;
        while matches!(self.src.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        self.src.get(i).copied()
    }

    pub(super) fn token(&mut self) -> Result<Token, ParseError> {
        loop {
            self.skip_spaces();
            match self.peek() {
                Some(b'\\') if self.peek_at(1) == Some(b'\n') => self.pos += 2,
                Some(b'#') => {
                    while !matches!(self.peek(), None | Some(b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
        let Some(b) = self.peek() else {
            return Ok(Token::Eof);
        };
        let two = (b, self.peek_at(1).unwrap_or(0));
        let three = self.peek_at(2).unwrap_or(0);
        let (token, len) = match two {
            (b'\n', _) => (Token::Newline, 1),
            (b';', b';') => (Token::Op(";;"), 2),
            (b';', _) => (Token::Op(";"), 1),
            (b'&', b'&') => (Token::Op("&&"), 2),
            (b'&', b'>') if three == b'>' => {
                (Token::Redirect(RedirectOp::Plain(RedirectKind::Append)), 3)
            }
            (b'&', b'>') => (Token::Redirect(RedirectOp::Plain(RedirectKind::Write)), 2),
            (b'&', _) => (Token::Op("&"), 1),
            (b'|', b'|') => (Token::Op("||"), 2),
            (b'|', b'&') => (Token::Op("|&"), 2),
            (b'|', _) => (Token::Op("|"), 1),
            (b'(', _) => (Token::Op("("), 1),
            (b')', _) => (Token::Op(")"), 1),
            (b'<', b'(') | (b'>', b'(') => return self.word().map(Token::Word),
            (b'<', _) | (b'>', _) => return Ok(self.redirect_op()),
            _ => return self.word_or_fd_redirect(),
        };
        self.pos += len;
        Ok(token)
    }

    fn redirect_op(&mut self) -> Token {
        let rest = &self.src[self.pos..];
        let (op, len) = if rest.starts_with(b"<<<") {
            (RedirectOp::HereString, 3)
        } else if rest.starts_with(b"<<-") {
            (RedirectOp::HereDoc { strip_tabs: true }, 3)
        } else if rest.starts_with(b"<<") {
            (RedirectOp::HereDoc { strip_tabs: false }, 2)
        } else if rest.starts_with(b"<>") {
            (RedirectOp::Plain(RedirectKind::ReadWrite), 2)
        } else if rest.starts_with(b"<&") || rest.starts_with(b">&") {
            let target = rest.get(2).copied().unwrap_or(0);
            let dup = target.is_ascii_digit() || target == b'-';
            let kind = if dup || rest[0] == b'<' {
                RedirectKind::Duplicate
            } else {
                RedirectKind::Write
            };
            (RedirectOp::Plain(kind), 2)
        } else if rest.starts_with(b">>") {
            (RedirectOp::Plain(RedirectKind::Append), 2)
        } else if rest.starts_with(b">|") {
            (RedirectOp::Plain(RedirectKind::Write), 2)
        } else if rest[0] == b'>' {
            (RedirectOp::Plain(RedirectKind::Write), 1)
        } else {
            (RedirectOp::Plain(RedirectKind::Read), 1)
        };
        self.pos += len;
        Token::Redirect(op)
    }

    /// A word, or `2>` style descriptor redirections.
    fn word_or_fd_redirect(&mut self) -> Result<Token, ParseError> {
        let digits = self.src[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        if digits > 0 && matches!(self.peek_at(digits), Some(b'<' | b'>')) {
            self.pos += digits;
            return Ok(self.redirect_op());
        }
        self.word().map(Token::Word)
    }

    fn word(&mut self) -> Result<Word, ParseError> {
        let mut word = WordBuf::default();
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b')' => break,
                b'(' if word.text.ends_with(b"=") && !word.dynamic => {
                    // An array assignment, `name=(a b c)`: data up to `)`.
                    let Some(end) = self.src[self.pos..].iter().position(|&c| c == b')') else {
                        return Err(ParseError::Unclosed("array assignment"));
                    };
                    word.push_src(&self.src[self.pos..self.pos + end + 1]);
                    self.pos += end + 1;
                }
                b'(' if word.started => break,
                b'<' | b'>' if self.peek_at(1) == Some(b'(') => {
                    let start = self.pos;
                    self.pos += 2;
                    self.substitution_list()?;
                    word.push_src(&self.src[start..self.pos]);
                }
                b'<' | b'>' => break,
                b'(' => break,
                b'\\' => {
                    word.quoted = true;
                    match self.peek_at(1) {
                        Some(b'\n') => self.pos += 2,
                        Some(c) => {
                            word.push(c);
                            self.pos += 2;
                        }
                        None => {
                            self.pos += 1;
                        }
                    }
                }
                b'\'' => {
                    word.quoted = true;
                    word.started = true;
                    self.pos += 1;
                    let Some(end) = self.src[self.pos..].iter().position(|&c| c == b'\'') else {
                        return Err(ParseError::Unclosed("single quote"));
                    };
                    word.text
                        .extend_from_slice(&self.src[self.pos..self.pos + end]);
                    self.pos += end + 1;
                }
                b'"' => {
                    word.quoted = true;
                    word.started = true;
                    self.pos += 1;
                    self.double_quoted(&mut word, Some(b'"'))?;
                }
                b'$' if self.peek_at(1) == Some(b'\'') => {
                    word.quoted = true;
                    word.started = true;
                    self.pos += 2;
                    self.ansi_c_quoted(&mut word)?;
                }
                b'$' if self.peek_at(1) == Some(b'"') => {
                    self.pos += 1;
                }
                b'$' | b'`' => self.expansion(&mut word)?,
                _ => {
                    if matches!(b, b'*' | b'?' | b'[' | b'{') {
                        word.pattern = true;
                    }
                    word.push(b);
                    self.pos += 1;
                }
            }
        }
        Ok(word.finish())
    }

    /// The inside of `"…"` (or of an expanding here-document when
    /// `close` is `None`), the opening quote already consumed.
    pub(super) fn double_quoted(
        &mut self,
        word: &mut WordBuf,
        close: Option<u8>,
    ) -> Result<(), ParseError> {
        loop {
            let Some(b) = self.peek() else {
                return match close {
                    Some(_) => Err(ParseError::Unclosed("double quote")),
                    None => Ok(()),
                };
            };
            if Some(b) == close {
                self.pos += 1;
                return Ok(());
            }
            match b {
                b'\\' => match self.peek_at(1) {
                    Some(c @ (b'$' | b'`' | b'"' | b'\\')) => {
                        word.push(c);
                        self.pos += 2;
                    }
                    Some(b'\n') => self.pos += 2,
                    _ => {
                        word.push(b'\\');
                        self.pos += 1;
                    }
                },
                b'$' | b'`' => self.expansion(word)?,
                _ => {
                    word.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn ansi_c_quoted(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        loop {
            let Some(b) = self.peek() else {
                return Err(ParseError::Unclosed("$'…' quote"));
            };
            self.pos += 1;
            match b {
                b'\'' => return Ok(()),
                b'\\' => {
                    let Some(c) = self.peek() else {
                        return Err(ParseError::Unclosed("$'…' quote"));
                    };
                    self.pos += 1;
                    match c {
                        b'n' => word.push(b'\n'),
                        b't' => word.push(b'\t'),
                        b'x' => {
                            let hex: Vec<u8> = self.src[self.pos..]
                                .iter()
                                .take(2)
                                .take_while(|c| c.is_ascii_hexdigit())
                                .copied()
                                .collect();
                            self.pos += hex.len();
                            let value = u8::from_str_radix(&String::from_utf8_lossy(&hex), 16);
                            word.push(value.unwrap_or(b'x'));
                        }
                        b'0'..=b'7' => {
                            let oct: Vec<u8> = self.src[self.pos - 1..]
                                .iter()
                                .take(3)
                                .take_while(|c| (b'0'..=b'7').contains(*c))
                                .copied()
                                .collect();
                            self.pos += oct.len() - 1;
                            let value = u8::from_str_radix(&String::from_utf8_lossy(&oct), 8);
                            word.push(value.unwrap_or(b'0'));
                        }
                        other => word.push(other),
                    }
                }
                other => word.push(other),
            }
        }
    }

    /// `$name`, `${…}`, `$(…)`, `$((…))` or a backtick substitution; the
    /// commands inside substitutions are parsed one level deeper.
    fn expansion(&mut self, word: &mut WordBuf) -> Result<(), ParseError> {
        let start = self.pos;
        if self.peek() == Some(b'`') {
            self.pos += 1;
            let mut inner = Vec::new();
            loop {
                match self.peek() {
                    None => return Err(ParseError::Unclosed("backtick")),
                    Some(b'`') => {
                        self.pos += 1;
                        break;
                    }
                    Some(b'\\') if matches!(self.peek_at(1), Some(b'`' | b'\\' | b'$')) => {
                        inner.push(self.src[self.pos + 1]);
                        self.pos += 2;
                    }
                    Some(c) => {
                        inner.push(c);
                        self.pos += 1;
                    }
                }
            }
            let mut sub = self.nested(&inner)?;
            sub.list(Stop::End)?;
            word.push_src(&self.src[start..self.pos]);
            return Ok(());
        }
        // `$`
        match self.peek_at(1) {
            Some(b'(') if self.peek_at(2) == Some(b'(') => {
                self.pos += 3;
                let mut level = 2u32;
                while level > 0 {
                    match self.peek() {
                        None => return Err(ParseError::Unclosed("arithmetic expansion")),
                        Some(b'(') => level += 1,
                        Some(b')') => level -= 1,
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            Some(b'(') => {
                self.pos += 2;
                self.substitution_list()?;
            }
            Some(b'{') => {
                self.pos += 2;
                let mut inner = WordBuf::default();
                let mut level = 1u32;
                loop {
                    match self.peek() {
                        None => return Err(ParseError::Unclosed("${…} expansion")),
                        Some(b'}') => {
                            level -= 1;
                            self.pos += 1;
                            if level == 0 {
                                break;
                            }
                        }
                        Some(b'{') => {
                            level += 1;
                            self.pos += 1;
                        }
                        Some(b'$' | b'`') => self.expansion(&mut inner)?,
                        Some(b'\'') => {
                            self.pos += 1;
                            let Some(end) = self.src[self.pos..].iter().position(|&c| c == b'\'')
                            else {
                                return Err(ParseError::Unclosed("single quote"));
                            };
                            self.pos += end + 1;
                        }
                        Some(b'"') => {
                            self.pos += 1;
                            self.double_quoted(&mut inner, Some(b'"'))?;
                        }
                        Some(b'\\') => self.pos += 2.min(self.src.len() - self.pos),
                        Some(_) => self.pos += 1,
                    }
                }
            }
            Some(c) if c.is_ascii_alphanumeric() || c == b'_' => {
                self.pos += 1;
                if c.is_ascii_digit() {
                    self.pos += 1;
                } else {
                    while self
                        .peek()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
                    {
                        self.pos += 1;
                    }
                }
            }
            Some(b'@' | b'*' | b'#' | b'?' | b'-' | b'$' | b'!') => self.pos += 2,
            _ => {
                // A lone `$` is literal.
                word.push(b'$');
                self.pos += 1;
                return Ok(());
            }
        }
        word.push_src(&self.src[start..self.pos]);
        Ok(())
    }

    /// The list inside `$(` or `<(` up to its `)`, one level deeper.
    fn substitution_list(&mut self) -> Result<(), ParseError> {
        self.enter()?;
        let pending = std::mem::take(&mut self.pending_heredocs);
        self.list(Stop::Paren)?;
        self.pending_heredocs = pending;
        self.depth -= 1;
        Ok(())
    }
}

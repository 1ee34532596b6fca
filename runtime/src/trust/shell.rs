//! A small shell-command parser, enough to see every command a line runs.
//!
//! The gate cannot judge `rm -rf /` by searching text: `git commit -m "rm -rf /"`
//! is harmless data while `sh -c 'rm -rf /'` is not, and `r\m -r -f /` is the
//! same command as `rm -rf /`. So a command line is parsed the way a POSIX
//! shell would split it: quotes removed, escapes applied, and every simple
//! command found, at any depth — after `;`, `&&`, `||`, `|`, `&`, newlines,
//! inside `( … )` and `{ …; }`, in `$( … )`, backticks and `<( … )`, in
//! here-documents that expand, in function bodies, in `if`/`while`/`for`/
//! `case`. The result is flat: a list of [`SimpleCommand`]s with their words,
//! redirections and pipe links, plus the functions defined.
//!
//! It is not a shell: it never expands variables or globs. A word that holds an
//! expansion is marked [`Word::dynamic`], keeping its source text (`$HOME`).
//! What it cannot follow (an unclosed quote, a here-document without its end,
//! nesting deeper than the limit) is a [`ParseError`], and the gate treats an
//! unparsable command as one it cannot allow. It runs on every command, so it
//! is one pass over the bytes with no backtracking.

/// A word of a command after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The text, quotes removed; expansions keep their source text.
    pub text: String,
    /// Whether the word holds an expansion (`$x`, `$( … )`, backticks), so
    /// its value is only known when it runs.
    pub dynamic: bool,
    /// Whether any part of the word was quoted or escaped.
    pub quoted: bool,
}

/// What a redirection does with its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedirectKind {
    /// `>`, `>|`, `&>`: truncates and writes.
    Write,
    /// `>>`, `&>>`: appends.
    Append,
    /// `<`: reads.
    Read,
    /// `<>`: reads and writes.
    ReadWrite,
    /// `>&N`, `<&N`: duplicates a descriptor.
    Duplicate,
}

/// One redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// What it does.
    pub kind: RedirectKind,
    /// Its target: a file, or a descriptor number for duplications.
    pub target: Word,
}

/// A simple command: words, redirections, where its input comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words, the program first (assignments included: see
    /// `inspect` for what strips them).
    pub words: Vec<Word>,
    /// Its redirections, in order.
    pub redirects: Vec<Redirect>,
    /// The text of a here-document or here-string given as its input.
    pub stdin_text: Option<String>,
    /// The index (in [`Parsed::commands`]) of the command piped into it.
    pub piped_from: Option<usize>,
    /// Whether it runs in the background (`&`).
    pub background: bool,
    /// How deep it sits: 0 at the top, +1 per substitution, subshell or group.
    pub depth: u32,
}

/// A function the command line defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDef {
    /// Its name.
    pub name: String,
    /// Whether its body calls itself.
    pub calls_itself: bool,
    /// Whether its body pipes or sends something to the background.
    pub forks: bool,
}

/// Everything a command line runs, flattened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Every simple command at any depth, each after the commands nested in
    /// its words.
    pub commands: Vec<SimpleCommand>,
    /// The functions defined.
    pub functions: Vec<FunctionDef>,
}

/// Why a command line could not be analysed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A quote, parenthesis, brace or substitution is not closed.
    #[error("it has an unclosed {0}")]
    Unclosed(&'static str),
    /// Something closes that was never opened.
    #[error("it has an unexpected `{0}`")]
    Unexpected(String),
    /// A here-document never reaches its end marker.
    #[error("its here-document never reaches the end marker `{0}`")]
    HereDoc(String),
    /// Subshells, substitutions and nested shells go deeper than the limit.
    #[error("it nests commands more than {0} levels deep")]
    TooDeep(u32),
}

/// Parses `text` as a shell command line. `max_depth` bounds nesting.
pub fn parse(text: &str, max_depth: u32) -> Result<Parsed, ParseError> {
    let mut out = Parsed::default();
    parse_into(text, 0, max_depth, &mut out)?;
    Ok(out)
}

/// Parses `text` at `depth`, appending what it finds to `out`.
pub fn parse_into(
    text: &str,
    depth: u32,
    max_depth: u32,
    out: &mut Parsed,
) -> Result<(), ParseError> {
    if depth > max_depth {
        return Err(ParseError::TooDeep(max_depth));
    }
    let mut parser = Parser {
        src: text.as_bytes(),
        pos: 0,
        depth,
        max_depth,
        out,
        pending_heredocs: Vec::new(),
    };
    parser.list(Stop::End)?;
    Ok(())
}

/// Scans text that expands like a double-quoted string (an unquoted
/// here-document body) for the commands its substitutions run.
pub fn scan_expansions(
    text: &str,
    depth: u32,
    max_depth: u32,
    out: &mut Parsed,
) -> Result<(), ParseError> {
    let mut parser = Parser {
        src: text.as_bytes(),
        pos: 0,
        depth,
        max_depth,
        out,
        pending_heredocs: Vec::new(),
    };
    let mut word = WordBuf::default();
    parser.double_quoted(&mut word, None)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    End,
    Paren,
    Brace,
    CaseItem,
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(Word),
    Op(&'static str),
    Redirect(RedirectOp),
    Newline,
    Eof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RedirectOp {
    Plain(RedirectKind),
    HereDoc { strip_tabs: bool },
    HereString,
}

struct PendingHereDoc {
    command: usize,
    delimiter: String,
    strip_tabs: bool,
    expands: bool,
}

#[derive(Default)]
struct WordBuf {
    text: Vec<u8>,
    dynamic: bool,
    quoted: bool,
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
        }
    }
}

const RESERVED_OPENERS: &[&str] = &["if", "then", "elif", "else", "do", "while", "until", "!"];
const RESERVED_CLOSERS: &[&str] = &["fi", "done", "esac"];

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    depth: u32,
    max_depth: u32,
    out: &'a mut Parsed,
    pending_heredocs: Vec<PendingHereDoc>,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<u8> {
        self.src.get(self.pos + offset).copied()
    }

    fn nested<'b>(&'b mut self, src: &'b [u8]) -> Result<Parser<'b>, ParseError> {
        let depth = self.depth + 1;
        if depth > self.max_depth {
            return Err(ParseError::TooDeep(self.max_depth));
        }
        Ok(Parser {
            src,
            pos: 0,
            depth,
            max_depth: self.max_depth,
            out: &mut *self.out,
            pending_heredocs: Vec::new(),
        })
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(ParseError::TooDeep(self.max_depth));
        }
        Ok(())
    }

    /// A list of pipelines up to `stop`; consumes the closing token.
    fn list(&mut self, stop: Stop) -> Result<(), ParseError> {
        loop {
            let ended = self.pipeline(stop)?;
            match ended {
                Ended::Continue => {}
                Ended::Stop => return Ok(()),
            }
        }
    }

    /// One pipeline; says whether the list goes on.
    fn pipeline(&mut self, stop: Stop) -> Result<Ended, ParseError> {
        let first = self.out.commands.len();
        let mut previous: Option<usize> = None;
        loop {
            let (command, token) = self.command(stop)?;
            if let (Some(idx), Some(from)) = (command, previous) {
                self.out.commands[idx].piped_from = Some(from);
            }
            if command.is_some() {
                previous = command;
            }
            match token {
                Token::Op("|") | Token::Op("|&") => continue,
                Token::Op("&") => {
                    for c in &mut self.out.commands[first..] {
                        c.background = true;
                    }
                    return Ok(Ended::Continue);
                }
                Token::Op(";") | Token::Op("&&") | Token::Op("||") | Token::Newline => {
                    return Ok(Ended::Continue)
                }
                Token::Op(";;") if stop == Stop::CaseItem => return Ok(Ended::Stop),
                Token::Op(")") if stop == Stop::Paren => return Ok(Ended::Stop),
                Token::Word(w) if stop == Stop::Brace && w.text == "}" && !w.quoted => {
                    return Ok(Ended::Stop)
                }
                Token::Word(w) if stop == Stop::CaseItem && w.text == "esac" && !w.quoted => {
                    self.pos -= 4;
                    return Ok(Ended::Stop);
                }
                Token::Eof => {
                    return match stop {
                        Stop::End => Ok(Ended::Stop),
                        Stop::Paren => Err(ParseError::Unclosed("parenthesis")),
                        Stop::Brace => Err(ParseError::Unclosed("brace group")),
                        Stop::CaseItem => Err(ParseError::Unclosed("case")),
                    }
                }
                Token::Op(op) => return Err(ParseError::Unexpected(op.to_string())),
                Token::Word(w) => return Err(ParseError::Unexpected(w.text)),
                Token::Redirect(_) => return Err(ParseError::Unexpected("redirection".into())),
            }
        }
    }

    /// One command; returns its index (if it made one) and the token that
    /// ended it.
    fn command(&mut self, stop: Stop) -> Result<(Option<usize>, Token), ParseError> {
        let mut cmd = SimpleCommand {
            depth: self.depth,
            ..SimpleCommand::default()
        };
        let mut heredocs: Vec<(String, bool, bool)> = Vec::new();
        loop {
            let at_start = cmd.words.is_empty() && cmd.redirects.is_empty();
            let token = self.token()?;
            match token {
                Token::Word(w) if at_start && !w.quoted && !w.dynamic => {
                    let t = w.text.as_str();
                    if t == "esac" && stop == Stop::CaseItem {
                        return Ok((None, Token::Word(w)));
                    }
                    if RESERVED_OPENERS.contains(&t) || RESERVED_CLOSERS.contains(&t) {
                        continue;
                    }
                    if t == "}" {
                        return Ok((None, Token::Word(w)));
                    }
                    if t == "{" {
                        self.group(Stop::Brace)?;
                        continue;
                    }
                    if t == "for" || t == "select" {
                        self.skip_for_header()?;
                        continue;
                    }
                    if t == "case" {
                        self.case()?;
                        continue;
                    }
                    if t == "function" {
                        let name = match self.token()? {
                            Token::Word(n) => n.text,
                            other => return Err(ParseError::Unexpected(describe(&other))),
                        };
                        self.function_body(name)?;
                        continue;
                    }
                    if self.peek_after_spaces(0) == Some(b'(') {
                        let save = self.pos;
                        self.skip_spaces();
                        self.pos += 1;
                        if self.peek_after_spaces(0) == Some(b')') {
                            self.skip_spaces();
                            self.pos += 1;
                            self.function_body(w.text)?;
                            continue;
                        }
                        self.pos = save;
                    }
                    cmd.words.push(w);
                }
                Token::Word(w) => cmd.words.push(w),
                Token::Op("(") if at_start => {
                    self.group(Stop::Paren)?;
                }
                Token::Op("(") => return Err(ParseError::Unexpected("(".into())),
                Token::Redirect(RedirectOp::Plain(kind)) => {
                    let target = self.redirect_target()?;
                    cmd.redirects.push(Redirect { kind, target });
                }
                Token::Redirect(RedirectOp::HereString) => {
                    let target = self.redirect_target()?;
                    cmd.stdin_text = Some(target.text);
                }
                Token::Redirect(RedirectOp::HereDoc { strip_tabs }) => {
                    let target = self.redirect_target()?;
                    heredocs.push((target.text, strip_tabs, !target.quoted));
                }
                other => {
                    let idx = self.finish(cmd, heredocs);
                    if other == Token::Eof {
                        if let Some(doc) = self.pending_heredocs.first() {
                            return Err(ParseError::HereDoc(doc.delimiter.clone()));
                        }
                    }
                    if other == Token::Newline {
                        self.read_heredocs()?;
                    }
                    return Ok((idx, other));
                }
            }
        }
    }

    fn finish(&mut self, cmd: SimpleCommand, heredocs: Vec<(String, bool, bool)>) -> Option<usize> {
        if cmd.words.is_empty() && cmd.redirects.is_empty() && heredocs.is_empty() {
            return None;
        }
        let idx = self.out.commands.len();
        self.out.commands.push(cmd);
        for (delimiter, strip_tabs, expands) in heredocs {
            self.pending_heredocs.push(PendingHereDoc {
                command: idx,
                delimiter,
                strip_tabs,
                expands,
            });
        }
        Some(idx)
    }

    fn read_heredocs(&mut self) -> Result<(), ParseError> {
        let pending = std::mem::take(&mut self.pending_heredocs);
        for doc in pending {
            let mut body = String::new();
            let mut found = false;
            while self.pos < self.src.len() {
                let end = self.src[self.pos..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(self.src.len(), |i| self.pos + i);
                let raw = String::from_utf8_lossy(&self.src[self.pos..end]).into_owned();
                self.pos = (end + 1).min(self.src.len());
                let line = if doc.strip_tabs {
                    raw.trim_start_matches('\t')
                } else {
                    raw.as_str()
                };
                if line == doc.delimiter {
                    found = true;
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            if !found {
                return Err(ParseError::HereDoc(doc.delimiter));
            }
            if doc.expands {
                let depth = self.depth;
                scan_expansions(&body, depth + 1, self.max_depth, self.out)?;
            }
            self.out.commands[doc.command].stdin_text = Some(body);
        }
        Ok(())
    }

    fn group(&mut self, stop: Stop) -> Result<(), ParseError> {
        self.enter()?;
        self.list(stop)?;
        self.depth -= 1;
        Ok(())
    }

    fn function_body(&mut self, name: String) -> Result<(), ParseError> {
        let first = self.out.commands.len();
        loop {
            match self.token()? {
                Token::Newline => continue,
                Token::Word(w) if w.text == "{" && !w.quoted => {
                    self.group(Stop::Brace)?;
                    break;
                }
                Token::Op("(") => {
                    self.group(Stop::Paren)?;
                    break;
                }
                other => return Err(ParseError::Unexpected(describe(&other))),
            }
        }
        let body = &self.out.commands[first..];
        let calls_itself = body
            .iter()
            .any(|c| c.words.first().is_some_and(|w| w.text == name));
        let forks = body.iter().any(|c| c.background || c.piped_from.is_some());
        self.out.functions.push(FunctionDef {
            name,
            calls_itself,
            forks,
        });
        Ok(())
    }

    /// `for NAME [in WORDS…]` up to `;` or a newline: its words are data.
    fn skip_for_header(&mut self) -> Result<(), ParseError> {
        loop {
            match self.token()? {
                Token::Word(_) | Token::Op("(") | Token::Op(")") => {}
                Token::Op(";") | Token::Newline => return Ok(()),
                Token::Eof => return Err(ParseError::Unclosed("for loop")),
                other => return Err(ParseError::Unexpected(describe(&other))),
            }
        }
    }

    /// `case WORD in (PATTERN) LIST ;; … esac`.
    fn case(&mut self) -> Result<(), ParseError> {
        match self.token()? {
            Token::Word(_) => {}
            other => return Err(ParseError::Unexpected(describe(&other))),
        }
        loop {
            match self.token()? {
                Token::Newline => continue,
                Token::Word(w) if w.text == "in" => break,
                other => return Err(ParseError::Unexpected(describe(&other))),
            }
        }
        loop {
            // A pattern list up to `)`, or `esac`.
            let mut started = false;
            loop {
                match self.token()? {
                    Token::Newline | Token::Op(";") if !started => continue,
                    Token::Word(w) if w.text == "esac" && !started => return Ok(()),
                    Token::Op("(") if !started => started = true,
                    Token::Word(_) | Token::Op("|") => started = true,
                    Token::Op(")") => break,
                    Token::Eof => return Err(ParseError::Unclosed("case")),
                    other => return Err(ParseError::Unexpected(describe(&other))),
                }
            }
            self.group(Stop::CaseItem)?;
        }
    }

    fn redirect_target(&mut self) -> Result<Word, ParseError> {
        match self.token()? {
            Token::Word(w) => Ok(w),
            other => Err(ParseError::Unexpected(describe(&other))),
        }
    }

    fn skip_spaces(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
    }

    fn peek_after_spaces(&self, from: usize) -> Option<u8> {
        let mut i = self.pos + from;
        while matches!(self.src.get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        self.src.get(i).copied()
    }

    fn token(&mut self) -> Result<Token, ParseError> {
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
                    word.push(b);
                    self.pos += 1;
                }
            }
        }
        Ok(word.finish())
    }

    /// The inside of `"…"` (or of an expanding here-document when
    /// `close` is `None`), the opening quote already consumed.
    fn double_quoted(&mut self, word: &mut WordBuf, close: Option<u8>) -> Result<(), ParseError> {
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

enum Ended {
    Continue,
    Stop,
}

fn describe(token: &Token) -> String {
    match token {
        Token::Word(w) => w.text.clone(),
        Token::Op(op) => (*op).to_string(),
        Token::Redirect(_) => "redirection".into(),
        Token::Newline => "end of line".into(),
        Token::Eof => "end of the command".into(),
    }
}

#[cfg(test)]
#[path = "shell_tests.rs"]
mod tests;

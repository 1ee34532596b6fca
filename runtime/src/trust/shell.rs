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

mod words;

use words::WordBuf;

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
    /// Whether the word holds an unquoted `*`, `?`, `[` or `{`, so the
    /// shell may expand it into other words (globs, brace expansion).
    pub pattern: bool,
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

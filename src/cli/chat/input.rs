//! Where the chat reads its lines: a line editor on a terminal, plain
//! lines from a pipe.
//!
//! On a terminal, rustyline gives line editing, history kept in the home
//! (`chat_history`, one for every conversation, as a shell keeps one for
//! every folder), Tab completion of the slash commands, and a line ending
//! in `\` going on on the next one. rustyline blocks, so it lives on a
//! thread of its own and the session asks it for a line at a time; between
//! two lines the terminal is back in its normal mode, so a Ctrl-C during a
//! turn is a signal the session catches. From a pipe, lines are read as
//! they come, with the same `\` rule and no editing, so a script can drive
//! `troupe chat`.

use std::io::Write;
use std::path::PathBuf;

use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Editor, Helper};
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};
use tokio::sync::oneshot;

use super::slash;
use crate::cli::questions::Input;

/// What reading a line gave.
#[derive(Debug)]
pub enum Read {
    /// A line (lines joined by a trailing `\` are joined by a newline).
    Line(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    /// Ctrl-D, or the end of the pipe.
    End,
}

/// The chat's input.
pub enum Terminal {
    /// A line editor on the terminal.
    Editor(LineEditor),
    /// Plain lines (stdin is not a terminal).
    Plain(Lines<BufReader<Stdin>>),
}

impl Terminal {
    /// The line editor when stdin and stdout are a terminal (history in
    /// `history`), plain lines otherwise.
    pub fn open(history: PathBuf) -> Self {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            match LineEditor::start(history) {
                Ok(editor) => return Self::Editor(editor),
                Err(e) => tracing::warn!(error = %e, "no line editor; reading plain lines"),
            }
        }
        Self::Plain(BufReader::new(tokio::io::stdin()).lines())
    }

    /// Whether this is a terminal (a spinner and colours may be drawn).
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Editor(_))
    }

    /// Reads the next line at the chat's prompt, kept in the history.
    pub async fn prompt(&mut self, out: &mut impl Write) -> std::io::Result<Read> {
        match self {
            Self::Editor(editor) => editor.read("> ", true).await,
            Self::Plain(lines) => {
                write!(out, "\n> ")?;
                out.flush()?;
                let mut text = String::new();
                loop {
                    // `next_line` is cancel safe: a Ctrl-C (handled by the
                    // caller's select) loses nothing typed.
                    let Some(line) = lines.next_line().await? else {
                        return Ok(if text.is_empty() {
                            Read::End
                        } else {
                            Read::Line(text)
                        });
                    };
                    match line.strip_suffix('\\') {
                        Some(head) => {
                            text.push_str(head);
                            text.push('\n');
                        }
                        None => {
                            text.push_str(&line);
                            return Ok(Read::Line(text));
                        }
                    }
                }
            }
        }
    }
}

impl Input for Terminal {
    async fn line(
        &mut self,
        prompt: &str,
        out: &mut impl Write,
    ) -> std::io::Result<Option<String>> {
        match self {
            Self::Editor(editor) => {
                out.flush()?;
                Ok(match editor.read(prompt, false).await? {
                    Read::Line(line) => Some(line),
                    Read::Interrupted | Read::End => None,
                })
            }
            Self::Plain(lines) => lines.line(prompt, out).await,
        }
    }
}

/// One request to the editor's thread.
struct Request {
    prompt: String,
    remember: bool,
    reply: oneshot::Sender<std::io::Result<Read>>,
}

/// rustyline on a thread of its own; dropping this ends the thread.
pub struct LineEditor {
    requests: std::sync::mpsc::Sender<Request>,
}

impl LineEditor {
    fn start(history: PathBuf) -> rustyline::Result<Self> {
        let config = rustyline::Config::builder()
            .max_history_size(2000)?
            .history_ignore_dups(true)?
            .history_ignore_space(true)
            .auto_add_history(false)
            .build();
        let mut editor: Editor<ChatHelper, FileHistory> = Editor::with_config(config)?;
        editor.set_helper(Some(ChatHelper));
        // What was typed is the user's alone, as the home's other files.
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            let made = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&history)
                .and_then(|f| f.set_permissions(std::fs::Permissions::from_mode(0o600)));
            if let Err(e) = made {
                tracing::warn!(path = %history.display(), error = %e, "chat history not kept private");
            }
        }
        if history.exists() {
            if let Err(e) = editor.load_history(&history) {
                tracing::warn!(path = %history.display(), error = %e, "chat history not read");
            }
        }
        let (requests, queue) = std::sync::mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("chat-line-editor".into())
            .spawn(move || {
                while let Ok(request) = queue.recv() {
                    let read = match editor.readline(&request.prompt) {
                        Ok(line) => {
                            if request.remember && !line.trim().is_empty() {
                                remember(&mut editor, &history, &line);
                            }
                            Ok(Read::Line(join_continued(&line)))
                        }
                        Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
                        Err(ReadlineError::Eof) => Ok(Read::End),
                        Err(ReadlineError::Io(e)) => Err(e),
                        Err(other) => Err(std::io::Error::other(other.to_string())),
                    };
                    // The session may have gone: nothing to answer then.
                    let _ = request.reply.send(read);
                }
            })?;
        Ok(Self { requests })
    }

    async fn read(&mut self, prompt: &str, remember: bool) -> std::io::Result<Read> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request {
                prompt: prompt.to_owned(),
                remember,
                reply,
            })
            .map_err(|_| std::io::Error::other("the line editor stopped"))?;
        answer
            .await
            .map_err(|_| std::io::Error::other("the line editor stopped"))?
    }
}

/// Adds a line to the history and appends it to the file at once, so a
/// chat that ends any way keeps what was typed.
fn remember(editor: &mut Editor<ChatHelper, FileHistory>, path: &std::path::Path, line: &str) {
    if let Err(e) = editor
        .add_history_entry(line)
        .and_then(|_| editor.append_history(path))
    {
        tracing::warn!(path = %path.display(), error = %e, "chat history not written");
    }
}

/// Lines joined by a trailing `\`, as typed, to the text sent.
fn join_continued(typed: &str) -> String {
    typed.replace("\\\n", "\n")
}

/// The editor's helper: completes slash commands, continues a line
/// ending in `\`.
struct ChatHelper;

impl Completer for ChatHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        let typed = &line[..pos];
        Ok((
            0,
            slash::complete(typed)
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ))
    }
}

impl Hinter for ChatHelper {
    type Hint = String;
}

impl Highlighter for ChatHelper {}

impl Validator for ChatHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Helper for ChatHelper {}

#[cfg(test)]
mod tests {
    #[test]
    fn a_trailing_backslash_joins_lines_with_a_newline() {
        assert_eq!(
            super::join_continued("one\\\ntwo\\\nthree"),
            "one\ntwo\nthree"
        );
        assert_eq!(super::join_continued("C:\\ path"), "C:\\ path");
    }
}

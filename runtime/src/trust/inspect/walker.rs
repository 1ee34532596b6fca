//! The walk through a parsed command line: each simple command is seen
//! through what stands in front of its program, and what runs more code
//! (`sh -c`, `eval`, `find -exec`, a script, a shell fed by a pipe or a
//! here-document) is walked in turn, down to the [`Invocation`]s the rules
//! are matched against.

use std::path::{Path, PathBuf};

use super::interpreters::{self, Code, FETCHERS};
use super::words::{
    echoed_text, is_assignment, is_system_program, join, option_takes_value, program_of, read_head,
    read_only_program, shell_input, ShellInput, SHELLS,
};
use super::{patterns, Analysis, AnalysisError, Env, Invocation, Limits, Opaque};
use crate::trust::shell::{self, Parsed, RedirectKind, SimpleCommand, Word};

pub(super) struct Walker<'a> {
    env: &'a Env,
    /// `env` with the working folder `cd` has moved to so far.
    here: Env,
    limits: &'a Limits,
    pub(super) out: Analysis,
    /// The scripts run, each with the invocation that runs it by an
    /// interpreter (that one does not count as writing it).
    scripts: Vec<(PathBuf, Option<usize>)>,
}

impl<'a> Walker<'a> {
    /// A walk of commands run in `env`, within `limits`.
    pub(super) fn new(env: &'a Env, limits: &'a Limits) -> Self {
        Self {
            env,
            here: env.clone(),
            limits,
            out: Analysis::default(),
            scripts: Vec::new(),
        }
    }

    pub(super) fn text(
        &mut self,
        text: &str,
        depth: u32,
        elevated: bool,
        script: Option<&Path>,
    ) -> Result<(), AnalysisError> {
        let mut parsed = Parsed::default();
        shell::parse_into(text, depth, self.limits.max_depth, &mut parsed)?;
        self.out.functions.append(&mut parsed.functions);
        for cmd in &parsed.commands {
            let source = cmd.piped_from.and_then(|i| parsed.commands.get(i));
            let fetched = fed_by_fetcher(&parsed.commands, cmd);
            self.command(cmd, source, fetched, elevated, script)?;
        }
        Ok(())
    }

    fn command(
        &mut self,
        cmd: &SimpleCommand,
        source: Option<&SimpleCommand>,
        fetched: bool,
        elevated: bool,
        script: Option<&Path>,
    ) -> Result<(), AnalysisError> {
        let braced;
        let cmd = match expand_braces(&cmd.words) {
            Some(words) => {
                braced = SimpleCommand {
                    words,
                    ..cmd.clone()
                };
                &braced
            }
            None => cmd,
        };
        let (start, elevated) = self.strip_wrappers(&cmd.words, cmd.depth, elevated, script)?;
        let full_text = join(&cmd.words);
        let words = &cmd.words[start..];
        let words = if words.is_empty() {
            // Only wrappers (`sudo -i`): the first of them is the program.
            let first = cmd.words.iter().position(|w| !is_assignment(&w.text));
            first.map_or(words, |i| &cmd.words[i..])
        } else {
            words
        };
        let Some((program_word, args)) = words.split_first() else {
            if !cmd.redirects.is_empty() {
                self.out.invocations.push(Invocation {
                    program: String::new(),
                    path: String::new(),
                    args: Vec::new(),
                    redirects: cmd.redirects.clone(),
                    elevated,
                    piped_from: None,
                    opaque: None,
                    script: script.map(Path::to_path_buf),
                    full_text,
                    cwd: self.here.cwd.clone(),
                });
            }
            return Ok(());
        };
        let path = program_word.text.clone();
        let program = path.rsplit('/').next().unwrap_or(&path).to_string();
        let piped_from = source.map(program_of);
        // A glob in the program's name (`/???/r?`) is a name computed when it runs.
        let globbed =
            program_word.pattern && (patterns::has_glob(&program) || program.contains('{'));
        let mut inv = Invocation {
            program,
            path,
            args: args.to_vec(),
            redirects: cmd.redirects.clone(),
            elevated,
            piped_from,
            opaque: (computed_name(program_word) || globbed).then_some(Opaque::ComputedProgram),
            script: script.map(Path::to_path_buf),
            full_text,
            cwd: self.here.cwd.clone(),
        };
        let depth = cmd.depth + 1;
        let mut nested: Vec<(String, bool)> = Vec::new();
        let mut scripts: Vec<(String, bool)> = Vec::new();
        let program = inv.program.as_str();
        let mut opaque: Option<Opaque> = None;
        if SHELLS.contains(&program) {
            match shell_input(&inv.args) {
                ShellInput::Command(w) => {
                    if w.dynamic {
                        opaque = Some(self.word_source(w));
                    }
                    nested.push((w.text.clone(), elevated));
                }
                ShellInput::Script(w) => {
                    if w.dynamic {
                        opaque = Some(self.word_source(w));
                    } else {
                        scripts.push((w.text.clone(), true));
                    }
                }
                ShellInput::Stdin => {
                    if let Some(text) = &cmd.stdin_text {
                        nested.push((text.clone(), elevated));
                    } else if let Some(src) = source {
                        match echoed_text(src) {
                            Some(text) if !fetched => nested.push((text, elevated)),
                            _ if fetched => opaque = Some(Opaque::Fetched),
                            _ => opaque = Some(Opaque::GeneratedCode),
                        }
                    } else if let Some(input) = read_redirect(cmd) {
                        // `bash < x.sh` runs the file like `bash x.sh`.
                        if input.dynamic {
                            opaque = Some(self.word_source(input));
                        } else {
                            scripts.push((input.text.clone(), true));
                        }
                    }
                }
            }
        } else if program == "eval" {
            if let Some(w) = inv.args.iter().find(|w| w.dynamic) {
                opaque = Some(self.word_source(w));
            }
            nested.push((join(&inv.args), elevated));
        } else if program == "source" || program == "." {
            if let Some(w) = inv.args.first() {
                if w.dynamic {
                    opaque = Some(self.word_source(w));
                } else {
                    scripts.push((w.text.clone(), true));
                }
            }
        } else if let Some(code) = interpreters::code(program, &inv.args) {
            opaque = match code {
                Code::Inline(Some(w)) if w.dynamic => match self.word_source(w) {
                    Opaque::Fetched => Some(Opaque::Fetched),
                    _ => Some(Opaque::InlineCode),
                },
                Code::Inline(_) => Some(Opaque::InlineCode),
                Code::Stdin if fetched => Some(Opaque::Fetched),
                Code::Stdin if cmd.stdin_text.is_some() || source.is_some() => {
                    Some(Opaque::InlineCode)
                }
                Code::Stdin => match read_redirect(cmd) {
                    Some(input) if input.dynamic => Some(self.word_source(input)),
                    Some(input) => {
                        self.interpreted(&input.text);
                        None
                    }
                    None => None,
                },
                Code::Script(w) if w.dynamic => Some(self.word_source(w)),
                Code::Script(w) => {
                    self.interpreted(&w.text);
                    None
                }
                Code::Module => None,
            };
        } else if program == "find" {
            let mut rest = inv.args.iter();
            while let Some(w) = rest.next() {
                if matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                    let inner: Vec<Word> = rest
                        .by_ref()
                        .take_while(|w| w.text != ";" && w.text != "+")
                        .cloned()
                        .collect();
                    let sub = SimpleCommand {
                        words: inner,
                        depth,
                        ..SimpleCommand::default()
                    };
                    self.command(&sub, None, false, elevated, script)?;
                }
            }
        } else if inv.path.contains('/') && !program_word.dynamic {
            if let Some(p) = self.here.resolve(&inv.path) {
                if !is_system_program(&p) {
                    scripts.push((inv.path.clone(), false));
                }
            }
        }
        // A computed name says the most: keep it over what the arguments show.
        inv.opaque = inv.opaque.or(opaque);
        if matches!(inv.program.as_str(), "cd" | "pushd") {
            let target = inv.operands().first().map(|t| self.here.resolve(t));
            self.here.cwd = match target {
                None => self.env.home.clone(),
                Some(Some(dir)) => dir,
                Some(None) => PathBuf::new(),
            };
        }
        if globbed {
            // Judge it as every program the rules know that it could be.
            for name in patterns::program_candidates(&inv.program) {
                let mut could_be = inv.clone();
                name.clone_into(&mut could_be.program);
                self.out.invocations.push(could_be);
            }
        }
        self.out.invocations.push(inv);
        for (text, elevated) in nested {
            self.text(&text, depth, elevated, script)?;
        }
        for (path, by_interpreter) in scripts {
            self.script(&path, depth, elevated, by_interpreter)?;
        }
        Ok(())
    }

    /// Skips assignments and wrappers; returns the index of the program and
    /// whether a wrapper elevated it. Wrappers that run a command string
    /// (`su -c`, `watch`, `env -S`) have it analysed here.
    fn strip_wrappers(
        &mut self,
        words: &[Word],
        depth: u32,
        mut elevated: bool,
        script: Option<&Path>,
    ) -> Result<(usize, bool), AnalysisError> {
        let mut i = 0;
        loop {
            let Some(word) = words.get(i) else {
                return Ok((i, elevated));
            };
            if is_assignment(&word.text) && !word.text.starts_with('=') {
                i += 1;
                continue;
            }
            let name = word.text.rsplit('/').next().unwrap_or(&word.text);
            let wrapper = match name {
                "sudo" | "doas" => {
                    elevated = true;
                    name
                }
                "su" => {
                    let rest = &words[i + 1..];
                    if let Some(pos) = rest
                        .iter()
                        .position(|w| w.text == "-c" || w.text == "--command")
                    {
                        if let Some(cmd) = rest.get(pos + 1) {
                            self.text(&cmd.text, depth + 1, true, script)?;
                        }
                    }
                    return Ok((i, true));
                }
                "command" | "builtin" => {
                    if words
                        .get(i + 1)
                        .is_some_and(|w| w.text == "-v" || w.text == "-V")
                    {
                        return Ok((i, elevated));
                    }
                    name
                }
                // Multi-call programs: `busybox rm` is `rm`.
                "busybox" | "toybox" => {
                    match words.get(i + 1) {
                        Some(next) if !next.text.starts_with('-') => i += 1,
                        _ => return Ok((i, elevated)),
                    }
                    continue;
                }
                "pkexec" => {
                    elevated = true;
                    name
                }
                "env" | "exec" | "nohup" | "setsid" | "time" | "nice" | "ionice" | "stdbuf"
                | "timeout" | "unbuffer" | "chronic" | "xargs" | "watch" => name,
                _ => return Ok((i, elevated)),
            };
            i += 1;
            // The wrapper's options.
            while let Some(w) = words.get(i) {
                let t = w.text.as_str();
                if t == "--" {
                    i += 1;
                    break;
                }
                if wrapper == "env" && (t == "-S" || t == "--split-string") {
                    if let Some(cmd) = words.get(i + 1) {
                        self.text(&cmd.text, depth + 1, elevated, script)?;
                    }
                    return Ok((words.len(), elevated));
                }
                if t.starts_with('-') && t.len() > 1 {
                    i += if option_takes_value(wrapper, t) { 2 } else { 1 };
                } else if wrapper == "env" && is_assignment(t) {
                    i += 1;
                } else {
                    break;
                }
            }
            if wrapper == "timeout" && words.get(i).is_some() {
                i += 1; // the duration
            }
            if wrapper == "watch" {
                let rest = join(&words[i.min(words.len())..]);
                self.text(&rest, depth + 1, elevated, script)?;
                return Ok((words.len(), elevated));
            }
        }
    }

    fn script(
        &mut self,
        written: &str,
        depth: u32,
        elevated: bool,
        by_interpreter: bool,
    ) -> Result<(), AnalysisError> {
        if !self.limits.read_scripts {
            return Ok(());
        }
        let Some(path) = self.here.resolve(written) else {
            return Err(AnalysisError::Script {
                path: PathBuf::from(written),
                problem: "cannot be located (its name or folder depends on a variable)".into(),
            });
        };
        self.scripts.push((path.clone(), None));
        let problem = |p: String| AnalysisError::Script {
            path: path.clone(),
            problem: p,
        };
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(problem(
                    "does not exist, so the gate cannot read what it would run".into(),
                ))
            }
            Err(e) => return Err(problem(format!("cannot be read ({e})"))),
        };
        if meta.is_dir() {
            return Ok(());
        }
        let head = read_head(&path).map_err(|e| problem(format!("cannot be read ({e})")))?;
        if head.contains(&0) || head.starts_with(b"\x7fELF") {
            return Ok(()); // a binary program, not a script
        }
        if !by_interpreter && head.starts_with(b"#!") {
            // Run by its path, the `#!` line names what runs it.
            let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line);
            let is_shell = line
                .split(|c: char| c == '/' || c.is_whitespace())
                .any(|part| SHELLS.contains(&part));
            if !is_shell {
                return Ok(()); // another language: its interpreter is what runs
            }
        }
        if meta.len() > self.limits.max_script_bytes {
            return Err(problem(format!(
                "is {} bytes, more than the {} the gate reads",
                meta.len(),
                self.limits.max_script_bytes
            )));
        }
        let content =
            std::fs::read_to_string(&path).map_err(|e| problem(format!("cannot be read ({e})")))?;
        self.text(&content, depth, elevated, Some(&path))
    }

    /// What a dynamic word that holds code brings: code fetched from
    /// outside when a fetcher runs inside it (`"$(curl …)"`, `<(wget …)`),
    /// else code generated when it runs.
    fn word_source(&self, word: &Word) -> Opaque {
        let fetches = shell::parse(&word.text, self.limits.max_depth)
            .is_ok_and(|parsed| parsed.commands.iter().any(runs_fetcher));
        if fetches {
            Opaque::Fetched
        } else {
            Opaque::GeneratedCode
        }
    }

    /// Records a script an interpreter runs, for the self-written check;
    /// the invocation about to be pushed is the one running it.
    fn interpreted(&mut self, written: &str) {
        if let Some(path) = self.here.resolve(written) {
            let runner = self.out.invocations.len();
            self.scripts.push((path, Some(runner)));
        }
    }

    /// A command that writes a script and runs it is judged before the
    /// script has its new content: such a command cannot be allowed.
    pub(super) fn check_self_written_scripts(&self) -> Result<(), AnalysisError> {
        for (script, runner) in &self.scripts {
            for (index, inv) in self.out.invocations.iter().enumerate() {
                if *runner == Some(index) {
                    continue;
                }
                let writes_it = inv
                    .redirect_writes()
                    .chain(if read_only_program(&inv.program) {
                        Vec::new()
                    } else {
                        inv.operands()
                    })
                    .filter_map(|t| inv.env_in(self.env).resolve(t))
                    .any(|p| &p == script);
                if writes_it && inv.script.as_deref() != Some(script.as_path()) {
                    return Err(AnalysisError::Script {
                        path: script.clone(),
                        problem: format!(
                            "the same command also changes (`{}`), so its content is not known yet",
                            inv.text()
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

/// Whether the program word's name (after its last `/`) is computed when
/// it runs: `$(printf rm)`, `$R`, `$a$b`, `` `echo rm` ``. A folder computed
/// in front of a written name (`"$DIR"/run.sh`) still names its program.
fn computed_name(word: &Word) -> bool {
    if !word.dynamic {
        return false;
    }
    let name = word.text.rsplit('/').next().unwrap_or(&word.text);
    name.is_empty() || name.contains(['$', '`', '(', ')', '{', '}', '\'', '"', '\\'])
}

/// The words with their brace lists expanded (`{rm,-rf,~}` is three
/// words); `None` when no word has one.
fn expand_braces(words: &[Word]) -> Option<Vec<Word>> {
    if !words.iter().any(|w| w.pattern && w.text.contains('{')) {
        return None;
    }
    let mut out = Vec::with_capacity(words.len());
    for word in words {
        let items = (word.pattern && word.text.contains('{'))
            .then(|| patterns::expand_braces(&word.text))
            .flatten();
        match items {
            Some(items) => out.extend(items.into_iter().map(|text| Word {
                pattern: patterns::has_glob(&text) || text.contains('{'),
                text,
                ..word.clone()
            })),
            None => out.push(word.clone()),
        }
    }
    Some(out)
}

/// Whether any command in the pipeline feeding `cmd` runs a fetcher
/// (`curl … | tee x | sh`).
fn fed_by_fetcher(commands: &[SimpleCommand], cmd: &SimpleCommand) -> bool {
    let mut next = cmd.piped_from;
    let mut seen = 0;
    while let Some(index) = next {
        let Some(source) = commands.get(index) else {
            return false;
        };
        if runs_fetcher(source) {
            return true;
        }
        seen += 1;
        if seen > commands.len() {
            return false;
        }
        next = source.piped_from;
    }
    false
}

/// Whether a simple command runs a program that fetches from outside the
/// machine, directly or behind a wrapper (`sudo curl`).
fn runs_fetcher(cmd: &SimpleCommand) -> bool {
    const WRAPPERS: &[&str] = &[
        "sudo", "doas", "env", "command", "builtin", "exec", "nohup", "setsid", "time", "nice",
        "ionice", "stdbuf", "timeout", "xargs",
    ];
    for w in &cmd.words {
        let text = w.text.as_str();
        let name = text.rsplit('/').next().unwrap_or(text);
        if FETCHERS.contains(&name) {
            return true;
        }
        let skipped = is_assignment(text)
            || WRAPPERS.contains(&name)
            || text.starts_with('-')
            || text
                .chars()
                .all(|c| c.is_ascii_digit() || c == '.' || c == 's' || c == 'm');
        if !skipped {
            return false;
        }
    }
    false
}

/// The file a command reads its input from (`< x.sh`), if any.
fn read_redirect(cmd: &SimpleCommand) -> Option<&Word> {
    cmd.redirects
        .iter()
        .rev()
        .find(|r| r.kind == RedirectKind::Read)
        .map(|r| &r.target)
}

//! The chat's slash commands: lines the prompt answers itself, never sent
//! to the model.
//!
//! A line is a command when its first word starts with `/` and has no other
//! `/` in it: `/help` is a command, `/etc/hosts is gone` is a message. A
//! line starting with `//` is sent with one `/` less, for the rare message
//! that must start with a command's name. One table ([`COMMANDS`]) gives
//! `/help` its text and the line editor its completions.

/// A command the chat prompt answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slash {
    /// List the commands and keys.
    Help,
    /// Leave the chat.
    Quit,
    /// Start a new conversation with the same bot.
    New,
    /// Show the model, or switch to another for the next turns.
    Model(Option<String>),
    /// The tools the conversation is offered.
    Tools,
    /// Tokens and cost of the conversation so far.
    Cost,
    /// The conversation's plan, as the model last wrote it.
    Plan,
}

impl Slash {
    /// The command as typed.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Help => "/help",
            Self::Quit => "/quit",
            Self::New => "/new",
            Self::Model(_) => "/model",
            Self::Tools => "/tools",
            Self::Cost => "/cost",
            Self::Plan => "/plan",
        }
    }
}

/// What a line typed at the prompt is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A message for the model (a `//` escape already undone).
    Message(String),
    /// A command for the prompt.
    Command(Slash),
    /// A line that looks like a command but is not one: what to say.
    Refused(String),
}

/// Every command: its name, its argument, what it does.
pub const COMMANDS: &[(&str, &str, &str)] = &[
    ("/help", "", "list the commands and keys"),
    ("/new", "", "start a new conversation with the same bot"),
    (
        "/model",
        "[SPEC]",
        "show the model, or switch to SPEC (a models.toml name, `openai:…`, `script:…`)",
    ),
    ("/tools", "", "the tools this conversation is offered"),
    ("/cost", "", "tokens and cost of this conversation so far"),
    (
        "/plan",
        "",
        "the conversation's plan, as the model last wrote it",
    ),
    ("/quit", "", "leave (also /exit, or Ctrl-D)"),
];

/// Reads one line typed at the prompt (already trimmed).
pub fn parse(line: &str) -> Line {
    if let Some(rest) = line.strip_prefix("//") {
        return Line::Message(format!("/{rest}"));
    }
    let Some(body) = line.strip_prefix('/') else {
        return Line::Message(line.to_owned());
    };
    let (word, arg) = match body.split_once(char::is_whitespace) {
        Some((w, a)) => (w, a.trim()),
        None => (body, ""),
    };
    if word.is_empty() || word.contains('/') {
        // A path, or a lone `/`: a message.
        return Line::Message(line.to_owned());
    }
    let no_arg = |slash: Slash| {
        if arg.is_empty() {
            Line::Command(slash)
        } else {
            Line::Refused(format!(
                "/{word} takes no argument; /help lists the commands"
            ))
        }
    };
    match word {
        "help" | "?" => no_arg(Slash::Help),
        "quit" | "exit" => no_arg(Slash::Quit),
        "new" => no_arg(Slash::New),
        "tools" => no_arg(Slash::Tools),
        "cost" => no_arg(Slash::Cost),
        "plan" => no_arg(Slash::Plan),
        "model" => Line::Command(Slash::Model((!arg.is_empty()).then(|| arg.to_owned()))),
        other => Line::Refused(format!(
            "/{other} is not a command: /help lists them (start the line with // to send it to the model as it is)"
        )),
    }
}

/// The help `/help` prints.
pub fn help() -> String {
    let mut text = String::from("Commands (answered here, never sent to the model):\n");
    for (name, arg, what) in COMMANDS {
        let head = if arg.is_empty() {
            (*name).to_owned()
        } else {
            format!("{name} {arg}")
        };
        text.push_str(&format!("  {head:<15} {what}\n"));
    }
    text.push_str(
        "Keys: ↑/↓ recall earlier lines (kept in the home's chat_history), Tab completes a command,\n\
         a line ending in \\ goes on on the next line, Ctrl-C stops a running turn, Ctrl-D leaves.\n\
         A line starting with // is sent to the model with one / less.",
    );
    text
}

/// The commands that complete `typed` (the start of a line's first word).
pub fn complete(typed: &str) -> Vec<&'static str> {
    if !typed.starts_with('/') || typed.contains(char::is_whitespace) {
        return Vec::new();
    }
    COMMANDS
        .iter()
        .map(|(name, _, _)| *name)
        .filter(|name| name.starts_with(typed))
        .collect()
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn commands_are_read_and_messages_left_alone() {
        let cases = [
            ("/help", Line::Command(Slash::Help)),
            ("/?", Line::Command(Slash::Help)),
            ("/quit", Line::Command(Slash::Quit)),
            ("/exit", Line::Command(Slash::Quit)),
            ("/new", Line::Command(Slash::New)),
            ("/tools", Line::Command(Slash::Tools)),
            ("/cost", Line::Command(Slash::Cost)),
            ("/plan", Line::Command(Slash::Plan)),
            ("/model", Line::Command(Slash::Model(None))),
            (
                "/model  script:turns.json ",
                Line::Command(Slash::Model(Some("script:turns.json".into()))),
            ),
            ("hello /help", Line::Message("hello /help".into())),
            (
                "/etc/hosts is empty",
                Line::Message("/etc/hosts is empty".into()),
            ),
            ("/", Line::Message("/".into())),
            ("//help me", Line::Message("/help me".into())),
        ];
        for (typed, want) in cases {
            assert_eq!(parse(typed), want, "{typed}");
        }
    }

    #[test]
    fn an_unknown_command_or_a_stray_argument_is_refused_with_what_to_do() {
        let Line::Refused(why) = parse("/halp") else {
            panic!("/halp was not refused");
        };
        assert!(
            why.contains("/halp is not a command") && why.contains("/help"),
            "{why}"
        );
        let Line::Refused(why) = parse("/quit now") else {
            panic!("/quit now was not refused");
        };
        assert!(why.contains("takes no argument"), "{why}");
    }

    #[test]
    fn help_lists_every_command_and_completion_finds_them() {
        let help = help();
        for (name, _, _) in COMMANDS {
            assert!(help.contains(name), "{name} missing from /help");
        }
        assert_eq!(
            complete("/"),
            COMMANDS.iter().map(|c| c.0).collect::<Vec<_>>()
        );
        assert_eq!(complete("/pl"), vec!["/plan"]);
        assert_eq!(complete("/model x"), Vec::<&str>::new());
        assert_eq!(complete("hello"), Vec::<&str>::new());
    }
}

//! Rules as data: each has an id, a matcher, a reason and examples.
//!
//! A rule says what it catches twice: in code (its [`Matcher`]) and in
//! words (examples that must match, and near misses that must not). The
//! examples are run through the whole analyser when a [`RuleSet`] is built,
//! so a rule that drifts from its examples is a load error, not a silent hole
//! in the gate. The user's own deny and allow lists are [`PatternList`]s:
//! globs over a command's text, or regexes behind `re:`.

use std::collections::HashSet;

use regex::Regex;

use super::inspect::{analyse, Analysis, Env, Invocation, Limits};

/// Which step of the gate a rule belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    /// Blocked always, in every mode, whatever the user allowed.
    Hardline,
    /// Acts outside the machine: the user approves each time, even in auto mode.
    Outside,
    /// Cannot be read (computed programs, generated or inline code): never
    /// approved unasked, in any mode.
    Unanalysable,
    /// Risky: the guardian judges it (skipped in auto mode).
    Dangerous,
}

/// A predicate over one program run.
pub type InvocationTest = fn(&Invocation, &Env) -> bool;

/// A predicate over the whole analysed command (functions, pipelines).
pub type AnalysisTest = fn(&Analysis, &Env) -> Option<String>;

/// How a rule recognises what it catches.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// A predicate over each program the command runs.
    Invocation(InvocationTest),
    /// A regex over each program's text (`rm -rf build`), unanchored.
    Text(Regex),
    /// A predicate over the whole command; returns what it found.
    Whole(AnalysisTest),
}

/// One rule of the gate.
#[derive(Debug, Clone)]
pub struct Rule {
    /// A short stable id (`rm-root`), shown in every refusal.
    pub id: String,
    /// Which step of the gate it belongs to.
    pub tier: Tier,
    /// What it catches.
    pub matcher: Matcher,
    /// Why it is caught, completing "… because it …".
    pub reason: String,
    /// Commands it must catch.
    pub matches: Vec<String>,
    /// Near misses it must let through.
    pub passes: Vec<String>,
}

impl Rule {
    /// A rule with a predicate over each program run.
    pub fn invocation(id: &str, tier: Tier, reason: &str, test: InvocationTest) -> Self {
        Self::with(id, tier, reason, Matcher::Invocation(test))
    }

    /// A rule with a predicate over the whole command.
    pub fn whole(id: &str, tier: Tier, reason: &str, test: AnalysisTest) -> Self {
        Self::with(id, tier, reason, Matcher::Whole(test))
    }

    /// A rule with a regex over each program's text.
    pub fn text(id: &str, tier: Tier, reason: &str, regex: &str) -> Result<Self, RuleError> {
        let regex = Regex::new(regex).map_err(|e| RuleError::Pattern {
            pattern: regex.to_string(),
            error: e.to_string(),
        })?;
        Ok(Self::with(id, tier, reason, Matcher::Text(regex)))
    }

    fn with(id: &str, tier: Tier, reason: &str, matcher: Matcher) -> Self {
        Self {
            id: id.to_string(),
            tier,
            matcher,
            reason: reason.to_string(),
            matches: Vec::new(),
            passes: Vec::new(),
        }
    }

    /// Adds commands it must catch.
    pub fn matching(mut self, examples: &[&str]) -> Self {
        self.matches
            .extend(examples.iter().map(|s| (*s).to_string()));
        self
    }

    /// Adds near misses it must let through.
    pub fn passing(mut self, examples: &[&str]) -> Self {
        self.passes
            .extend(examples.iter().map(|s| (*s).to_string()));
        self
    }

    /// What in `analysis` this rule catches (the program's text), if anything.
    pub fn find(&self, analysis: &Analysis, env: &Env) -> Option<String> {
        match &self.matcher {
            Matcher::Invocation(test) => analysis
                .invocations
                .iter()
                .find(|inv| test(inv, &inv.env_in(env)))
                .map(snippet),
            Matcher::Text(regex) => analysis
                .invocations
                .iter()
                .find(|inv| regex.is_match(&inv.text()))
                .map(snippet),
            Matcher::Whole(test) => test(analysis, env),
        }
    }

    fn check_examples(&self) -> Result<(), RuleError> {
        let env = Env::example();
        let limits = Limits {
            read_scripts: false,
            ..Limits::default()
        };
        for (examples, expected) in [(&self.matches, true), (&self.passes, false)] {
            for example in examples {
                let analysis =
                    analyse(example, &env, &limits).map_err(|e| RuleError::Unparsable {
                        rule: self.id.clone(),
                        example: example.clone(),
                        error: e.to_string(),
                    })?;
                if self.find(&analysis, &env).is_some() != expected {
                    return Err(RuleError::Example {
                        rule: self.id.clone(),
                        example: example.clone(),
                        should_match: expected,
                    });
                }
            }
        }
        Ok(())
    }
}

/// What a caught program looks like in a message: its text, cut short.
fn snippet(inv: &Invocation) -> String {
    let text = inv.text();
    let text = if inv.program.is_empty() {
        inv.full_text.clone()
    } else {
        text
    };
    shorten(&text, 120)
}

/// Cuts `text` to `max` characters, marking the cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max).collect();
    out.push('…');
    out
}

/// A rule set that failed to load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// An example does not behave as the rule says.
    #[error("rule `{rule}`: the example `{example}` should {} but does not; fix the rule or its example", if *should_match { "match" } else { "pass" })]
    Example {
        /// The rule.
        rule: String,
        /// The example.
        example: String,
        /// Whether it was listed as a match.
        should_match: bool,
    },
    /// An example cannot be analysed.
    #[error("rule `{rule}`: the example `{example}` cannot be analysed ({error}); write it as a plain command")]
    Unparsable {
        /// The rule.
        rule: String,
        /// The example.
        example: String,
        /// Why.
        error: String,
    },
    /// Two rules share an id.
    #[error("two rules are named `{0}`; give each its own id")]
    Duplicate(String),
    /// A pattern is not a valid regex.
    #[error("the pattern `{pattern}` is not valid ({error}); fix it in the [trust] settings")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// Why.
        error: String,
    },
}

/// A rule found in a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The rule's id.
    pub rule: String,
    /// Its tier.
    pub tier: Tier,
    /// Its reason.
    pub reason: String,
    /// What it caught.
    pub snippet: String,
}

/// The rules of the gate, their examples checked.
#[derive(Debug, Clone)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

impl RuleSet {
    /// Builds a rule set, checking every rule's examples and that ids are
    /// unique.
    pub fn new(rules: Vec<Rule>) -> Result<Self, RuleError> {
        let set = Self::distinct(rules)?;
        set.check_examples()?;
        Ok(set)
    }

    /// The rules, refused if two share an id; examples not run.
    fn distinct(rules: Vec<Rule>) -> Result<Self, RuleError> {
        let mut ids = HashSet::new();
        for rule in &rules {
            if !ids.insert(rule.id.as_str()) {
                return Err(RuleError::Duplicate(rule.id.clone()));
            }
        }
        Ok(Self { rules })
    }

    /// Runs every rule's examples: each must be caught, each near miss let
    /// through.
    pub fn check_examples(&self) -> Result<(), RuleError> {
        self.rules.iter().try_for_each(Rule::check_examples)
    }

    /// troupe's own rules: hardline, outside the machine, dangerous.
    ///
    /// Their examples are not run here: they are troupe's code, checked by
    /// its tests (`builtin_rules_load_with_their_examples_checked`), and
    /// running them was a tenth of every start.
    pub fn builtin() -> Result<Self, RuleError> {
        let mut rules = super::hardline::rules()?;
        rules.extend(super::outside::rules()?);
        rules.extend(super::unanalysable::rules()?);
        rules.extend(super::danger::rules()?);
        Self::distinct(rules)
    }

    /// The rules.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Every rule of `tier` the command hits, in rule order.
    pub fn hits(&self, tier: Tier, analysis: &Analysis, env: &Env) -> Vec<Hit> {
        self.rules
            .iter()
            .filter(|r| r.tier == tier)
            .filter_map(|r| {
                r.find(analysis, env).map(|snippet| Hit {
                    rule: r.id.clone(),
                    tier,
                    reason: r.reason.clone(),
                    snippet,
                })
            })
            .collect()
    }
}

/// The user's deny or allow list: patterns over a command's programs.
///
/// A pattern is a glob matched against the whole text of each program a
/// command runs, wrappers removed (`rm -rf build`, `git push origin main`):
/// `*` is any run of characters (spaces included), `?` one character, and the
/// glob must cover the whole text, so `git push*` catches every push and
/// `docker *` every docker command. A pattern starting with `re:` is a regex
/// instead, matched anywhere in the text (anchor it with `^…$`). A pattern
/// starting with `tool:` is a glob over tool names (`tool:web_*`) and applies
/// to every call of those tools.
#[derive(Debug, Clone, Default)]
pub struct PatternList {
    patterns: Vec<(String, Compiled)>,
}

#[derive(Debug, Clone)]
enum Compiled {
    Command(Regex),
    Tool(Regex),
}

impl PatternList {
    /// Compiles the patterns; a bad one is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Self, RuleError> {
        let mut out = Vec::new();
        for source in patterns {
            let source = source.trim();
            if source.is_empty() {
                continue;
            }
            let bad = |e: regex::Error| RuleError::Pattern {
                pattern: source.to_string(),
                error: e.to_string(),
            };
            let compiled = if let Some(re) = source.strip_prefix("re:") {
                Compiled::Command(Regex::new(re).map_err(bad)?)
            } else if let Some(glob) = source.strip_prefix("tool:") {
                Compiled::Tool(Regex::new(&glob_to_regex(glob)).map_err(bad)?)
            } else {
                Compiled::Command(Regex::new(&glob_to_regex(source)).map_err(bad)?)
            };
            out.push((source.to_string(), compiled));
        }
        Ok(Self { patterns: out })
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The first pattern naming the tool.
    pub fn tool_match(&self, tool: &str) -> Option<&str> {
        self.patterns.iter().find_map(|(source, c)| match c {
            Compiled::Tool(re) if re.is_match(tool) => Some(source.as_str()),
            _ => None,
        })
    }

    /// The first pattern matching the program's text or the simple command's
    /// full text.
    pub fn invocation_match(&self, inv: &Invocation) -> Option<&str> {
        let text = inv.text();
        self.patterns.iter().find_map(|(source, c)| match c {
            Compiled::Command(re) if re.is_match(&text) || re.is_match(&inv.full_text) => {
                Some(source.as_str())
            }
            _ => None,
        })
    }

    /// The first pattern matching a command line that could not be analysed
    /// (matched against its raw text).
    pub fn raw_match(&self, text: &str) -> Option<&str> {
        self.patterns.iter().find_map(|(source, c)| match c {
            Compiled::Command(re) if re.is_match(text) => Some(source.as_str()),
            _ => None,
        })
    }
}

fn glob_to_regex(glob: &str) -> String {
    let mut out = String::from("^");
    for c in glob.chars() {
        match c {
            '*' => out.push_str(".*"),
            '?' => out.push('.'),
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push('$');
    out
}

/// The files an invocation writes or destroys: its redirections, and the
/// destinations of the programs that write (`tee`, `cp`, `mv`, `dd of=`,
/// `sed -i`, `rm`, `truncate`…).
pub fn written_targets(inv: &Invocation) -> Vec<&str> {
    let mut out: Vec<&str> = inv.redirect_writes().collect();
    let operands = inv.operands();
    match inv.program.as_str() {
        "tee" | "rm" | "shred" | "truncate" | "unlink" | "touch" | "rmdir" => out.extend(operands),
        "cp" | "mv" | "install" | "ln" | "rsync" | "scp" => {
            if let Some(last) = operands.last() {
                out.push(last);
            }
        }
        "dd" => out.extend(inv.arg_texts().filter_map(|a| a.strip_prefix("of="))),
        "sed" | "perl" if inv.arg_texts().any(|a| a.starts_with("-i")) => {
            out.extend(operands.into_iter().skip(1))
        }
        _ => {}
    }
    out
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;

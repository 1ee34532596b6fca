//! The gate itself: the four steps, the guardian call, remembering answers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::approvals::{ApprovalAnswer, ApprovalStore, GateSession, MemoryApprovals};
use super::guardian::{Flag, Guardian, GuardianAnswer, GuardianRequest};
use super::hardline;
use super::inspect::{analyse_partly, normalize, Analysis, Env, Limits};
use super::path;
use super::protected;
use super::rules::{shorten, Hit, PatternList, RuleSet, Tier};
use super::{GateLimits, GateMode, GatePolicy, TrustError, Verdict};
use crate::home::Home;
use crate::protocol::ToolCall;
use crate::tool::{GateSubject, ToolSpec};

/// Where a call is judged: whose home, which folder, who can answer.
#[derive(Debug, Clone)]
pub struct GateContext {
    /// The troupe home.
    pub home: Home,
    /// The user's own home folder (`~`, `$HOME` in commands and paths).
    pub user_home: PathBuf,
    /// The working folder.
    pub cwd: PathBuf,
    /// Whether nobody is there to approve (a routine run, a subagent).
    pub unattended: bool,
    /// The conversation's approvals and guardian record.
    pub session: Arc<GateSession>,
}

impl GateContext {
    /// An attended context with a fresh session.
    pub fn new(home: Home, user_home: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        Self {
            home,
            user_home: user_home.into(),
            cwd: cwd.into(),
            unattended: false,
            session: Arc::new(GateSession::new()),
        }
    }

    /// Marks it unattended (or not).
    pub fn unattended(mut self, unattended: bool) -> Self {
        self.unattended = unattended;
        self
    }

    /// Shares a conversation's session.
    pub fn with_session(mut self, session: Arc<GateSession>) -> Self {
        self.session = session;
        self
    }
}

/// A decision before it meets the context: asks carry their rule so an
/// unattended run can refuse by it.
enum Outcome {
    Allow,
    Deny {
        rule: String,
        reason: String,
    },
    Ask {
        rule: String,
        reason: String,
    },
    /// Asked, or run in the sandbox in auto mode.
    Unanalysable {
        rule: String,
        reason: String,
    },
}

/// What steps 1 to 3 found in a command.
enum Screened {
    /// Decided already (hardline, deny list, outside, unanalysable).
    Decided(Outcome),
    /// Dangerous patterns for step 4 (empty: nothing risky), and, without
    /// a sandbox in ask mode, why the command is not read-only.
    Risky {
        hits: Vec<Hit>,
        writes: Option<String>,
    },
}

/// The trust gate.
#[derive(Debug, Clone)]
pub struct Gate {
    mode: GateMode,
    rules: Arc<RuleSet>,
    deny: PatternList,
    allow: PatternList,
    limits: GateLimits,
    guardian: Option<Arc<dyn Guardian>>,
    always: Arc<dyn ApprovalStore>,
    sandboxed: Sandboxed,
}

/// Whether commands run in a sandbox: known, or asked when first needed
/// (finding out runs a program, which a start-up should not wait for).
#[derive(Clone)]
enum Sandboxed {
    Known(bool),
    Lazy(Arc<dyn Fn() -> bool + Send + Sync>),
}

impl std::fmt::Debug for Sandboxed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Known(b) => write!(f, "{b}"),
            Self::Lazy(_) => f.write_str("(checked when first needed)"),
        }
    }
}

impl Gate {
    /// A gate with troupe's rules and the user's policy; no guardian, and
    /// "always" approvals in memory. Fails when a pattern of the policy is
    /// wrong.
    pub fn new(policy: &GatePolicy) -> Result<Self, TrustError> {
        Self::with_rules(policy, RuleSet::builtin()?)
    }

    /// A gate with its own rule set.
    pub fn with_rules(policy: &GatePolicy, rules: RuleSet) -> Result<Self, TrustError> {
        Ok(Self {
            mode: policy.mode,
            rules: Arc::new(rules),
            deny: PatternList::new(&policy.deny)?,
            allow: PatternList::new(&policy.allow)?,
            limits: policy.limits,
            guardian: None,
            always: Arc::new(MemoryApprovals::default()),
            sandboxed: Sandboxed::Known(false),
        })
    }

    /// Sets the guardian that judges dangerous commands.
    pub fn with_guardian(mut self, guardian: Arc<dyn Guardian>) -> Self {
        self.guardian = Some(guardian);
        self
    }

    /// Sets where "always" approvals are kept.
    pub fn with_approvals(mut self, store: Arc<dyn ApprovalStore>) -> Self {
        self.always = store;
        self
    }

    /// Says whether commands run in a sandbox where troupe's home is
    /// read-only ([`crate::sandbox`]); a gate assumes they do not until
    /// told. With one, auto mode runs [`Verdict::Unanalysable`] commands
    /// there; without one, commands that could touch the home
    /// ([`super::unsandboxed`]) are asked in every mode.
    pub fn with_sandbox(mut self, sandboxed: bool) -> Self {
        self.sandboxed = Sandboxed::Known(sandboxed);
        self
    }

    /// Like [`Gate::with_sandbox`], asking `check` when a decision first
    /// needs it (it should cache its answer).
    pub fn with_sandbox_check(mut self, check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.sandboxed = Sandboxed::Lazy(Arc::new(check));
        self
    }

    /// Whether commands run in a sandbox.
    pub fn sandboxed(&self) -> bool {
        match &self.sandboxed {
            Sandboxed::Known(b) => *b,
            Sandboxed::Lazy(check) => check(),
        }
    }

    /// The mode.
    pub fn mode(&self) -> GateMode {
        self.mode
    }

    /// Judges one call.
    pub async fn check(&self, spec: &ToolSpec, call: &ToolCall, ctx: &GateContext) -> Verdict {
        let outcome = self.judge(spec, call, ctx).await;
        match outcome {
            Outcome::Allow => Verdict::Allow,
            // The sandbox holds what the gate cannot read, in auto mode.
            Outcome::Unanalysable { .. } if self.mode == GateMode::Auto && self.sandboxed() => {
                Verdict::Allow
            }
            Outcome::Deny { rule, reason } => Verdict::Deny { rule, reason },
            Outcome::Ask { rule, reason } | Outcome::Unanalysable { rule, reason }
                if ctx.unattended =>
            {
                Verdict::Deny {
                    rule,
                    reason: format!(
                        "{reason} Nobody is here to approve it: this run is unattended (a \
                         routine or a subagent), so it is refused. Do the task without it, or \
                         leave it for a conversation with the user."
                    ),
                }
            }
            Outcome::Ask { reason, .. } => Verdict::Ask { reason },
            Outcome::Unanalysable { rule, reason } => Verdict::Unanalysable { rule, reason },
        }
    }

    /// Records the user's answer to an [`Verdict::Ask`] about this call.
    /// `Session` and `Always` are refused for what must be asked every time
    /// (outside the machine, unanalysable) or never runs (hardline, deny list).
    pub fn remember(
        &self,
        spec: &ToolSpec,
        call: &ToolCall,
        ctx: &GateContext,
        answer: ApprovalAnswer,
    ) -> Result<(), TrustError> {
        match answer {
            ApprovalAnswer::Deny => return Ok(()),
            ApprovalAnswer::Once => {
                ctx.session.reset_denials();
                return Ok(());
            }
            ApprovalAnswer::Session | ApprovalAnswer::Always => {}
        }
        let key = match &spec.gate {
            GateSubject::Call | GateSubject::Untrusted(_) => None,
            GateSubject::Command(arg) => match string_arg(call, arg) {
                Some(text) => {
                    let env = self.env(call, ctx);
                    match self.screen(text, &env) {
                        Screened::Risky { .. } => Some(command_key(text)),
                        Screened::Decided(_) => None,
                    }
                }
                None => None,
            },
            GateSubject::WritePath(arg) => string_arg(call, arg).and_then(|text| {
                let real = path::resolve(text, &ctx.user_home, &ctx.cwd).ok()?;
                matches!(self.write_outcome(text, ctx), Outcome::Ask { .. })
                    .then(|| write_key(&real))
            }),
        };
        let Some(key) = key else {
            return Err(TrustError::NotRememberable(format!(
                "`{}` cannot be approved beyond this once: commands that act outside the machine \
                 or cannot be analysed are asked every time, and blocked ones never run",
                spec.name
            )));
        };
        ctx.session.reset_denials();
        ctx.session.approve(key.clone());
        if answer == ApprovalAnswer::Always {
            self.always.add(&key)?;
        }
        Ok(())
    }

    async fn judge(&self, spec: &ToolSpec, call: &ToolCall, ctx: &GateContext) -> Outcome {
        if let Some(pattern) = self.deny.tool_match(&spec.name) {
            return Outcome::Deny {
                rule: "deny-list".into(),
                reason: format!(
                    "Blocked the tool `{}`: it matches `{pattern}` on the user's deny list. Do \
                     without it, or ask the user to remove the pattern from the deny list.",
                    spec.name
                ),
            };
        }
        match &spec.gate {
            GateSubject::Call => Outcome::Allow,
            GateSubject::Untrusted(source) => Outcome::Ask {
                rule: "untrusted-source".into(),
                reason: format!(
                    "`{}` is a tool of {source}, which the user marked untrusted, and it does \
                     not declare itself read-only: every call is asked.",
                    spec.name
                ),
            },
            GateSubject::Command(arg) => match call.arguments.get(arg) {
                None | Some(serde_json::Value::Null) => Outcome::Allow,
                Some(serde_json::Value::String(text)) => {
                    self.judge_command(spec, text, call, ctx).await
                }
                Some(_) => bad_argument(spec, arg),
            },
            GateSubject::WritePath(arg) => match call.arguments.get(arg) {
                None | Some(serde_json::Value::Null) => Outcome::Allow,
                Some(serde_json::Value::String(text)) => self.write_outcome(text, ctx),
                Some(_) => bad_argument(spec, arg),
            },
        }
    }

    fn env(&self, call: &ToolCall, ctx: &GateContext) -> Env {
        let cwd = call
            .arguments
            .get("cwd")
            .and_then(|v| v.as_str())
            .and_then(|c| resolve_path(c, ctx))
            .unwrap_or_else(|| ctx.cwd.clone());
        Env {
            home: ctx.user_home.clone(),
            cwd,
            troupe_home: ctx.home.root().to_path_buf(),
        }
    }

    fn analysis_limits(&self) -> Limits {
        Limits {
            max_chars: self.limits.max_command_chars,
            max_depth: self.limits.max_depth,
            max_script_bytes: self.limits.max_script_bytes,
            read_scripts: true,
        }
    }

    /// Steps 1 to 3, and the dangerous hits for step 4.
    fn screen(&self, text: &str, env: &Env) -> Screened {
        let (analysis, outcome) = analyse_partly(text, env, &self.analysis_limits());
        if let Some(hit) = self
            .rules
            .hits(Tier::Hardline, &analysis, env)
            .into_iter()
            .next()
        {
            return Screened::Decided(hardline_deny(hit));
        }
        let analysis = match outcome {
            Ok(()) => analysis,
            Err(e) => {
                if let Some(pattern) = self.deny.raw_match(text) {
                    return Screened::Decided(deny_listed(&shorten(text, 120), pattern));
                }
                return Screened::Decided(Outcome::Unanalysable {
                    rule: "unanalysable".into(),
                    reason: format!(
                        "The gate cannot analyse this command: {e}. It is never run unchecked, \
                         so the user decides; to avoid the question, run simpler commands \
                         (shorter, quotes closed, less nesting, scripts that exist)."
                    ),
                });
            }
        };
        for inv in &analysis.invocations {
            if let Some(pattern) = self.deny.invocation_match(inv) {
                return Screened::Decided(deny_listed(&shorten(&inv.text(), 120), pattern));
            }
        }
        if let Some(hit) = self
            .rules
            .hits(Tier::Outside, &analysis, env)
            .into_iter()
            .next()
        {
            return Screened::Decided(Outcome::Ask {
                reason: format!(
                    "`{}` {}. Commands that act outside this machine need the user's approval \
                     every time, even in auto mode (rule `{}`).",
                    hit.snippet, hit.reason, hit.rule
                ),
                rule: hit.rule,
            });
        }
        if let Some(hit) = self
            .rules
            .hits(Tier::Unanalysable, &analysis, env)
            .into_iter()
            .next()
        {
            return Screened::Decided(Outcome::Unanalysable {
                reason: format!(
                    "`{}` {}. A command the gate cannot read is never run unchecked, in any mode \
                     (rule `{}`): the user decides each time. To avoid the question, write the \
                     program's name out, or put the code in a script file and run that.",
                    hit.snippet, hit.reason, hit.rule
                ),
                rule: hit.rule,
            });
        }
        if !self.sandboxed() {
            if let Some(why) = super::unsandboxed::could_touch_home(text, env) {
                return Screened::Decided(Outcome::Ask {
                    rule: "unsandboxed-home".into(),
                    reason: format!(
                        "`{}` runs without a sandbox, and {why}: it could change troupe's own \
                         settings or database, so the user decides each time, in auto mode \
                         too. Install bubblewrap (the package `bubblewrap`) so commands run \
                         where troupe's home is read-only, or work inside the working folder \
                         with relative paths.",
                        shorten(text, 120)
                    ),
                });
            }
        }
        let unallowed = Analysis {
            invocations: analysis
                .invocations
                .into_iter()
                .filter(|inv| self.allow.invocation_match(inv).is_none())
                .collect(),
            functions: analysis.functions,
        };
        // Without a sandbox, ask mode asks for all but read-only commands.
        let writes = (self.mode == GateMode::Ask && !self.sandboxed())
            .then(|| super::read_only::writer(&unallowed, env))
            .flatten();
        Screened::Risky {
            hits: self.rules.hits(Tier::Dangerous, &unallowed, env),
            writes,
        }
    }

    async fn judge_command(
        &self,
        spec: &ToolSpec,
        text: &str,
        call: &ToolCall,
        ctx: &GateContext,
    ) -> Outcome {
        let env = self.env(call, ctx);
        let (hits, writes) = match self.screen(text, &env) {
            Screened::Decided(outcome) => return outcome,
            Screened::Risky { hits, writes } => (hits, writes),
        };
        if self.mode == GateMode::Auto || (hits.is_empty() && writes.is_none()) {
            return Outcome::Allow;
        }
        let key = command_key(text);
        if ctx.session.is_approved(&key) || self.always.contains(&key) {
            return Outcome::Allow;
        }
        if let Some(why) = writes {
            // The user, not the guardian: no pattern stands in for a sandbox.
            let risky = hits
                .first()
                .map(|h| format!(" It also {} (`{}`).", h.reason, h.rule))
                .unwrap_or_default();
            return Outcome::Ask {
                rule: "unsandboxed-ask".into(),
                reason: format!(
                    "Commands run unsandboxed here, so ask mode asks before every command that \
                     is not read-only (rule `unsandboxed-ask`): {why}.{risky} The user decides; \
                     an approval for the session or always covers this exact command. To ask \
                     less, {}, or allow such commands with an allow pattern.",
                    crate::sandbox::INSTALL_HINT
                ),
            };
        }
        let Some(first) = hits.first() else {
            return Outcome::Allow;
        };
        let what = format!("`{}` (it {})", first.snippet, first.reason);
        let rule = first.rule.clone();
        let Some(guardian) = &self.guardian else {
            return Outcome::Ask {
                reason: format!(
                    "{what} matches the dangerous pattern `{rule}`. The user decides; auto mode \
                     or an allow pattern would let such commands run without asking."
                ),
                rule,
            };
        };
        let limit = self.limits.guardian_denials;
        if ctx.session.guardian_denials() >= limit {
            return Outcome::Deny {
                rule: "guardian-streak".into(),
                reason: format!(
                    "Blocked {what}: the guardian refused the last {limit} risky commands in a \
                     row, so risky commands are refused without asking it for the rest of this \
                     session. Change approach; the user can allow such commands with an allow \
                     pattern or auto mode."
                ),
            };
        }
        let request = GuardianRequest {
            tool: spec.name.clone(),
            command: text.to_string(),
            cwd: env.cwd.clone(),
            flagged: hits
                .iter()
                .map(|h| Flag {
                    rule: h.rule.clone(),
                    reason: h.reason.clone(),
                    snippet: h.snippet.clone(),
                })
                .collect(),
            unattended: ctx.unattended,
        };
        let secs = self.limits.guardian_timeout_secs.max(1);
        let answer = tokio::time::timeout(Duration::from_secs(secs), guardian.judge(&request))
            .await
            .unwrap_or_else(|_| Err(format!("it did not answer within {secs} s")));
        match answer {
            Ok(GuardianAnswer::Approve) => {
                ctx.session.reset_denials();
                Outcome::Allow
            }
            Ok(GuardianAnswer::Deny { reason }) => {
                ctx.session.guardian_denied();
                Outcome::Deny {
                    rule: "guardian".into(),
                    reason: format!(
                        "The guardian refused {what}: {reason}. Do it another way; the user can \
                         allow such commands with an allow pattern or auto mode."
                    ),
                }
            }
            Ok(GuardianAnswer::Ask { reason }) => Outcome::Ask {
                rule: "guardian".into(),
                reason: format!("The guardian wants the user to decide on {what}: {reason}."),
            },
            Err(error) => Outcome::Ask {
                rule: "guardian-failed".into(),
                reason: format!(
                    "The guardian could not judge {what}: {error}. The user decides instead."
                ),
            },
        }
    }

    /// Judges a file tool writing `text`, resolved the way the tool will
    /// resolve it ([`path::resolve`]), by the rules commands' writes get
    /// ([`protected`]).
    fn write_outcome(&self, text: &str, ctx: &GateContext) -> Outcome {
        let real = match path::resolve(text, &ctx.user_home, &ctx.cwd) {
            Ok(real) => real,
            Err(e) => {
                return Outcome::Deny {
                    rule: "write-path".into(),
                    reason: format!("Blocked writing `{text}`: {e}."),
                }
            }
        };
        let shown = if Path::new(text) == real {
            format!("`{}`", real.display())
        } else {
            format!("`{text}` (which resolves to `{}`)", real.display())
        };
        if let Some(area) = protected::home_area(&ctx.home, &real) {
            return Outcome::Deny {
                rule: "troupe-home".into(),
                reason: area.refusal(&shown),
            };
        }
        let lexical = path::expand(text, &ctx.user_home, &ctx.cwd)
            .map(|p| normalize(&p))
            .unwrap_or_else(|_| real.clone());
        if [&lexical, &real]
            .iter()
            .any(|p| hardline::is_account_file(p))
        {
            return Outcome::Deny {
                rule: "account-files".into(),
                reason: format!(
                    "Blocked writing {shown}: it is one of the machine's account or privilege \
                     files. This is a hardline rule: no mode or approval lifts it."
                ),
            };
        }
        let Some(setting) = protected::user_setting(&ctx.user_home, &real) else {
            return Outcome::Allow;
        };
        let key = write_key(&real);
        if ctx.session.is_approved(&key) || self.always.contains(&key) {
            return Outcome::Allow;
        }
        // The same rule as a command writing there (`dotfile-write`): run
        // in auto mode, asked in ask mode; SSH's folder is asked in both.
        let rule = match setting {
            protected::UserSetting::Ssh => "ssh-folder",
            _ if self.mode == GateMode::Auto => return Outcome::Allow,
            _ => "dotfile-write",
        };
        Outcome::Ask {
            rule: rule.into(),
            reason: format!(
                "Writing {shown} changes {}, so the user approves it.",
                setting.describe()
            ),
        }
    }
}

fn hardline_deny(hit: Hit) -> Outcome {
    Outcome::Deny {
        reason: format!(
            "Blocked `{}`: it {}. This is a hardline rule (`{}`): it is blocked in every mode and \
             no approval or allow pattern lifts it. Do the task another way (name the exact files \
             or folders); if the user truly wants this, they run it themselves.",
            hit.snippet, hit.reason, hit.rule
        ),
        rule: hit.rule,
    }
}

fn deny_listed(snippet: &str, pattern: &str) -> Outcome {
    Outcome::Deny {
        rule: "deny-list".into(),
        reason: format!(
            "Blocked `{snippet}`: it matches `{pattern}` on the user's deny list. Do without it, \
             or ask the user to remove the pattern from the deny list."
        ),
    }
}

fn bad_argument(spec: &ToolSpec, arg: &str) -> Outcome {
    Outcome::Deny {
        rule: "gate-argument".into(),
        reason: format!(
            "Blocked the call of `{}`: its `{arg}` argument is not a string, so the gate cannot \
             judge it. Call it again with `{arg}` as a string.",
            spec.name
        ),
    }
}

fn string_arg<'a>(call: &'a ToolCall, arg: &str) -> Option<&'a str> {
    call.arguments.get(arg).and_then(|v| v.as_str())
}

fn command_key(text: &str) -> String {
    format!("command:{}", text.trim())
}

fn write_key(path: &Path) -> String {
    format!("write:{}", path.display())
}

/// Resolves a path argument: `~` against the context's user home, relative
/// paths against its working folder.
fn resolve_path(text: &str, ctx: &GateContext) -> Option<PathBuf> {
    Env {
        home: ctx.user_home.clone(),
        cwd: ctx.cwd.clone(),
        troupe_home: ctx.home.root().to_path_buf(),
    }
    .resolve(text)
}

/// The path with its existing ancestors' symlinks resolved, so a link into
/// the home's settings is seen for what it is.
pub(super) fn real_path(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
    let mut real = std::fs::canonicalize(&existing).unwrap_or(existing);
    for part in rest.into_iter().rev() {
        real.push(part);
    }
    real
}

//! The trust gate: what every tool call passes before it runs.
//!
//! An agent proposes; the gate decides whether the proposal runs, is
//! refused, or waits for the user. A tool's spec names what the gate judges
//! ([`GateSubject`](crate::tool::GateSubject)): nothing but the user's deny
//! list, a shell command, or a path written. For a command, in order:
//!
//! 1. **hardline** commands ([`hardline`]) are blocked always, in every mode,
//!    whatever the user allowed: `rm -rf /` in every spelling, `mkfs`, writing
//!    a disk, fork bombs, shutdown, `chmod -R 777 /`, overwriting
//!    `/etc/passwd`;
//! 2. the user's **deny list** blocks (deny beats allow);
//! 3. commands acting **outside the machine** ([`outside`]) ask the user
//!    every time, even in auto mode: writes through `gh`, `gcloud`, `gws`,
//!    printing their tokens, code fetched and run (`curl … | sh`), anything
//!    touching troupe's database or plugins; then commands the gate
//!    **cannot read** ([`unanalysable`]: computed program names, generated or
//!    inline code) get their own verdict, [`Verdict::Unanalysable`], asked
//!    in ask mode and run in the sandbox in auto mode (asked in both when
//!    commands run without one); and, when commands run without a sandbox,
//!    every command that could touch troupe's home ([`unsandboxed`]) is
//!    asked in every mode, and in ask mode every command that is not
//!    provably read-only ([`read_only`]) is asked too;
//! 4. **dangerous** patterns ([`danger`]) go to the [`Guardian`], which
//!    approves, denies or asks the user. Auto mode skips this step only, and
//!    so does a command every risky part of which the user's allow list
//!    covers.
//!
//! Commands are parsed ([`shell`]) and seen through ([`inspect`]): nested
//! `sh -c`, `eval`, substitutions and the scripts a command runs are judged
//! like the command itself, and quoted data (`git commit -m "rm -rf /"`) is
//! not mistaken for a command. What cannot be analysed is never allowed
//! unasked.
//! Rules are data ([`rules`]) whose examples are checked when they load.
//!
//! In an unattended run (a routine, a subagent) nobody can answer a
//! question, so every ask becomes a refusal that says so. Every refusal
//! names its rule, what was blocked and why, and what the user can do.

pub mod approvals;
pub mod danger;
mod gate;
pub mod guardian;
pub mod hardline;
pub mod inspect;
pub mod outside;
pub mod path;
pub mod protected;
pub mod read_only;
pub mod rules;
pub mod seal;
pub mod shell;
pub mod unanalysable;
pub mod unsandboxed;

use serde::{Deserialize, Serialize};

pub use crate::sandbox::UNSANDBOXED_GATE;

pub use approvals::{ApprovalAnswer, ApprovalStore, FileApprovals, GateSession, MemoryApprovals};
pub use gate::{Gate, GateContext};
pub use guardian::{Guardian, GuardianAnswer, GuardianRequest, ModelGuardian};
pub use rules::{RuleError, RuleSet, Tier};

/// What the gate decides about one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// The call runs.
    Allow,
    /// The call is refused.
    Deny {
        /// The id of the rule that refused it (`rm-root`, `deny-list`,
        /// `guardian`, …).
        rule: String,
        /// What was blocked, why, and what the user can do; shown to the model.
        reason: String,
    },
    /// The user must approve the call first.
    Ask {
        /// What the call does and why it needs approval; shown to the user.
        reason: String,
    },
    /// The gate cannot read what the command runs (a computed program name,
    /// generated or inline code): it never runs unchecked. The user is
    /// asked, as for [`Verdict::Ask`]; in auto mode with commands in a
    /// sandbox the gate gives [`Verdict::Allow`] instead, and the sandbox
    /// holds it.
    Unanalysable {
        /// The rule that found it (`computed-program`, `inline-code`, …).
        rule: String,
        /// What could not be read and what to do; shown to the user.
        reason: String,
    },
}

/// How much the gate asks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateMode {
    /// Dangerous commands go to the guardian (or the user).
    #[default]
    Ask,
    /// Dangerous commands run without the guardian; hardline, deny-listed
    /// and outside-the-machine commands are still blocked or asked.
    Auto,
}

/// How far the gate goes before it stops trusting what it sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateLimits {
    /// The longest command analysed, in characters; longer ones are asked.
    pub max_command_chars: usize,
    /// How deep commands may nest (substitutions, `sh -c`, scripts).
    pub max_depth: u32,
    /// The largest script file read, in bytes.
    pub max_script_bytes: u64,
    /// How long the guardian may take, in seconds.
    pub guardian_timeout_secs: u64,
    /// After this many guardian refusals in a row in one session, risky
    /// commands are refused without asking it.
    pub guardian_denials: u32,
}

impl Default for GateLimits {
    fn default() -> Self {
        Self {
            max_command_chars: 10_000,
            max_depth: 8,
            max_script_bytes: 256 * 1024,
            guardian_timeout_secs: 30,
            guardian_denials: 3,
        }
    }
}

/// The user's trust settings (`[trust]` in `config.toml`).
///
/// `deny` and `allow` hold patterns ([`rules::PatternList`]): a glob over
/// the text of each program a command runs (`git push*`, `docker *`), a regex
/// after `re:`, or a glob over tool names after `tool:`. Deny beats allow;
/// allow only spares a command the guardian, never a hardline or
/// outside-the-machine rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatePolicy {
    /// Ask or auto.
    pub mode: GateMode,
    /// Patterns always refused.
    pub deny: Vec<String>,
    /// Patterns that skip the guardian.
    pub allow: Vec<String>,
    /// Limits.
    pub limits: GateLimits,
}

/// A failure of the gate's setup or of remembering an approval.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A rule or a pattern is wrong.
    #[error(transparent)]
    Rules(#[from] RuleError),
    /// The approvals file could not be read or written.
    #[error("approvals file {path}: {message}")]
    Approvals {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
    /// The call cannot be approved beyond this once.
    #[error("{0}")]
    NotRememberable(String),
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;

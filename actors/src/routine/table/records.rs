//! What the routine table holds, as Rust values: a routine, its statuses
//! and catch-up policy, and the occurrences a scheduler claims, runs,
//! misses or finds interrupted.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use troupe_runtime::id::{ConversationId, RoutineId, RunId};
use troupe_runtime::protocol::Usage;

use super::{Result, RoutineError};
use crate::routine::schedule::Schedule;

/// Whether a routine fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineStatus {
    /// It fires on schedule.
    Active,
    /// It does not fire until resumed.
    Paused,
}

/// What happens to occurrences that passed while nothing was running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Record them as skipped and report them; run none.
    #[default]
    Skip,
    /// Run the latest once; record the others as skipped.
    RunOnce,
}

/// Where a run of a routine stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// A scheduler holds it and is about to run it.
    Claimed,
    /// Its conversation is running.
    Running,
    /// It finished.
    Done,
    /// It failed, or was interrupted.
    Failed,
    /// It was missed and not run.
    Skipped,
}

macro_rules! text_enum {
    ($ty:ident { $($variant:ident = $text:literal),+ $(,)? }) => {
        impl $ty {
            /// The stored text.
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $text),+ }
            }

            pub(super) fn from_stored(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($ty::$variant),)+
                    other => Err(RoutineError::Corrupt(format!(
                        "`{other}` is not a {}", stringify!($ty)
                    ))),
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

text_enum!(RoutineStatus { Active = "active", Paused = "paused" });
text_enum!(CatchUp { Skip = "skip", RunOnce = "run_once" });
text_enum!(RunStatus {
    Claimed = "claimed",
    Running = "running",
    Done = "done",
    Failed = "failed",
    Skipped = "skipped",
});

/// A routine as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Routine {
    /// Its id.
    pub id: RoutineId,
    /// The bot it belongs to (and runs as).
    pub owner_bot: String,
    /// Its name, unique per owner.
    pub name: String,
    /// The prompt each run starts with.
    pub prompt: String,
    /// When it fires.
    pub schedule: Schedule,
    /// Whether it fires.
    pub status: RoutineStatus,
    /// What happens to missed occurrences.
    pub catch_up: CatchUp,
    /// Its next occurrence; `None` when paused or when a once-routine has fired.
    pub next_fire_at: Option<DateTime<Utc>>,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
}

/// A routine to make.
#[derive(Debug, Clone)]
pub struct NewRoutine {
    /// The bot it belongs to.
    pub owner_bot: String,
    /// Its name, unique per owner.
    pub name: String,
    /// The prompt each run starts with.
    pub prompt: String,
    /// When it fires.
    pub schedule: Schedule,
    /// What happens to missed occurrences.
    pub catch_up: CatchUp,
}

/// Changes to a routine; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct RoutineUpdate {
    /// A new name.
    pub name: Option<String>,
    /// A new prompt.
    pub prompt: Option<String>,
    /// A new schedule (the next fire time is recomputed from now).
    pub schedule: Option<Schedule>,
    /// A new catch-up policy.
    pub catch_up: Option<CatchUp>,
}

/// An occurrence this holder won and must now run.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// The run's id.
    pub run_id: RunId,
    /// The routine.
    pub routine_id: RoutineId,
    /// Its owner.
    pub owner_bot: String,
    /// Its name.
    pub name: String,
    /// The prompt to run.
    pub prompt: String,
    /// The occurrence.
    pub scheduled_for: DateTime<Utc>,
    /// When the claim lapses unless renewed.
    pub lease_until: DateTime<Utc>,
}

/// Occurrences of one routine that passed without running; the owner should be told.
#[derive(Debug, Clone, PartialEq)]
pub struct Missed {
    /// The routine.
    pub routine_id: RoutineId,
    /// Its owner.
    pub owner_bot: String,
    /// Its name.
    pub name: String,
    /// How many were missed (not run).
    pub count: u64,
    /// Whether more were missed than were counted.
    pub count_is_lower_bound: bool,
    /// The first missed occurrence.
    pub first: DateTime<Utc>,
    /// The last missed occurrence.
    pub last: DateTime<Utc>,
    /// The run made instead, under `run_once` (or because a later occurrence was on time).
    pub caught_up_by: Option<RunId>,
}

/// A run whose holder vanished before it ended; it is now failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Interrupted {
    /// The run.
    pub run_id: RunId,
    /// The routine.
    pub routine_id: RoutineId,
    /// Its owner.
    pub owner_bot: String,
    /// Its name.
    pub name: String,
    /// The occurrence.
    pub scheduled_for: DateTime<Utc>,
    /// The holder that vanished.
    pub claimed_by: String,
    /// Its conversation, if it had started.
    pub conversation_id: Option<ConversationId>,
}

/// What one pass of the scheduler found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Due {
    /// Occurrences this holder won: run them.
    pub claims: Vec<Claim>,
    /// Missed occurrences: tell their owners.
    pub missed: Vec<Missed>,
    /// Runs whose holder vanished: tell their owners.
    pub interrupted: Vec<Interrupted>,
}

/// One occurrence of a routine, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Its id.
    pub id: RunId,
    /// The routine.
    pub routine_id: RoutineId,
    /// The occurrence.
    pub scheduled_for: DateTime<Utc>,
    /// The scheduler that claimed (or skipped) it.
    pub claimed_by: String,
    /// When the claim lapses.
    pub lease_until: Option<DateTime<Utc>>,
    /// When its conversation started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// Where it stands.
    pub status: RunStatus,
    /// Its conversation.
    pub conversation_id: Option<ConversationId>,
    /// What came of it, or why it did not run.
    pub summary: Option<String>,
    /// Tokens it used.
    pub usage: Option<Usage>,
}

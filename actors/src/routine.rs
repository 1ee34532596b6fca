//! Routines: a prompt run on a schedule, each run its own conversation.
//!
//! These are the building blocks the scheduler actor calls: [`schedule`]
//! turns what a person types (`weekdays at 9am`, `every 30m`, cron, an ISO
//! time) into next fire times in their time zone; [`table`] keeps routines
//! and their runs in SQLite, where claiming an occurrence is exactly-once
//! even for two schedulers sharing a database; [`clock`] lets the scheduler
//! run on a virtual clock in tests. The [`scheduler`] actor fires them,
//! [`run`] runs one as a conversation and reports it, and [`manage`] is
//! the backend of the `cronjob_manage` tool.

pub mod clock;
pub mod manage;
pub mod run;
pub mod schedule;
pub mod scheduler;
pub mod service;
pub mod table;

pub use clock::{Clock, SystemClock, VirtualClock};
pub use schedule::{parse, Schedule, ScheduleError, ScheduleKind};
pub use table::{
    CatchUp, Claim, Due, Interrupted, Missed, NewRoutine, Routine, RoutineError, RoutineStatus,
    RoutineUpdate, Run, RunStatus,
};

//! The handle through which tools reach other agents.
//!
//! `delegate`, `message_agent`, `bot_create`, `ask_user` and
//! `cronjob_manage` act on actors, which live above the tools in the
//! dependency order: they hand their request to the [`AgentServices`] the
//! node sets in its tools' services. Defined with those services
//! ([`crate::tool::services::agents`]), whose context holds them typed;
//! named here where their users look.

pub use crate::tool::services::agents::*;

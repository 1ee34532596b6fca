//! Typed, time-ordered identifiers.
//!
//! Every addressable thing in troupe has an id of its own type, so a
//! `BotId` can never be passed where a `ConversationId` is expected. Ids are
//! UUIDv7 underneath: they sort by creation time, which keeps SQLite's
//! B-trees append-only and makes "latest first" a plain ordering. They print
//! as `<prefix>_<32 hex digits>` (`conv_0193…`) and parse back from the same
//! form, so an id read in a log can be pasted into a command.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a valid {kind} id: expected `{prefix}_` followed by 32 hex digits")]
pub struct ParseIdError {
    /// The text that failed to parse.
    pub input: String,
    /// The kind of id that was expected (`bot`, `conversation`, …).
    pub kind: &'static str,
    /// The prefix that was expected.
    pub prefix: &'static str,
}

macro_rules! typed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// The prefix this id prints with.
            pub const PREFIX: &'static str = $prefix;

            /// A new id, ordered after every id made before it in this process.
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Wraps an existing UUID.
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The UUID underneath.
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }

            /// The millisecond Unix timestamp the id was made at.
            pub fn timestamp_ms(&self) -> u64 {
                self.0
                    .get_timestamp()
                    .map(|t| {
                        let (s, n) = t.to_unix();
                        s * 1000 + u64::from(n) / 1_000_000
                    })
                    .unwrap_or(0)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // The hex printed into a buffer and written whole: ids are
                // printed for every row and key a turn writes, and
                // `write!` through the UUID's own formatting cost several
                // times as much.
                let mut hex = [0u8; uuid::fmt::Simple::LENGTH];
                f.write_str($prefix)?;
                f.write_str("_")?;
                f.write_str(self.0.simple().encode_lower(&mut hex))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let err = || ParseIdError { input: s.to_string(), kind: $kind, prefix: $prefix };
                let rest = s
                    .strip_prefix($prefix)
                    .and_then(|r| r.strip_prefix('_'))
                    .ok_or_else(err)?;
                if rest.len() != 32 {
                    return Err(err());
                }
                Uuid::parse_str(rest).map(Self).map_err(|_| err())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

typed_id!(
    /// A bot: a named agent with its own mission, memory and skills.
    BotId, "bot", "bot"
);
typed_id!(
    /// A conversation: one history and one turn loop of a bot.
    ConversationId, "conv", "conversation"
);
typed_id!(
    /// A house: a tenant of people and bots, their threads and files.
    HouseId, "house", "house"
);
typed_id!(
    /// A thread of a multi-bot house.
    ThreadId, "thread", "thread"
);
typed_id!(
    /// A routine: a prompt run on a schedule.
    RoutineId, "routine", "routine"
);
typed_id!(
    /// A house's environment, where commands run (in a sandbox). It prints
    /// with the prefix `sandbox`, as the ids stored before the type was named
    /// after the environment do.
    EnvironmentId, "sandbox", "environment"
);
typed_id!(
    /// A delegation: a set of subagents spawned by one `delegate` call.
    DelegationId, "deleg", "delegation"
);
typed_id!(
    /// A message: the unit of durable delivery, also its idempotency key.
    MsgId, "msg", "message"
);
typed_id!(
    /// A subagent: one task of a delegation.
    SubagentId, "sub", "subagent"
);
typed_id!(
    /// One run of a routine.
    RunId, "run", "run"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_print_and_parse_back() {
        let id = ConversationId::new();
        let text = id.to_string();
        assert!(text.starts_with("conv_"));
        assert_eq!(text.len(), "conv_".len() + 32);
        assert_eq!(text, format!("conv_{}", id.as_uuid().simple()));
        assert_eq!(format!("{id:?}"), text);
        assert_eq!(text.parse::<ConversationId>().unwrap(), id);
    }

    #[test]
    fn ids_are_time_ordered() {
        let ids: Vec<MsgId> = (0..1000).map(|_| MsgId::new()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        let texts: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let mut sorted_texts = texts.clone();
        sorted_texts.sort();
        assert_eq!(texts, sorted_texts, "printed ids sort like the ids");
    }

    #[test]
    fn wrong_prefix_is_a_clear_error() {
        let bot = BotId::new().to_string();
        let err = bot.parse::<ConversationId>().unwrap_err();
        assert_eq!(err.kind, "conversation");
        assert!(err.to_string().contains("expected `conv_`"), "{err}");
        assert!("conv_xyz".parse::<ConversationId>().is_err());
        assert!("".parse::<ConversationId>().is_err());
    }

    #[test]
    fn ids_round_trip_through_json_and_msgpack() {
        let id = DelegationId::new();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<DelegationId>(&json).unwrap(), id);
        let bytes = rmp_serde::to_vec(&id).unwrap();
        assert_eq!(rmp_serde::from_slice::<DelegationId>(&bytes).unwrap(), id);
    }
}

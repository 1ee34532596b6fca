//! Budgets: tokens, money, tool calls and wall time, per turn, per bot and
//! per delegation subtree.
//!
//! A [`Scope`] holds one set of limits and what was spent against them, and
//! points to its parent: charging a turn's scope charges its bot's scope too,
//! and a subagent's scope charges its delegation's, which charges the parent
//! turn's. Reaching any limit on the way up stops the work with a status that
//! names the budget; what was done so far stays committed.
//!
//! Here, below the tools, so that the scope of the turn in progress is a
//! typed service of its tools (what `delegate` charges).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

/// Limits; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Tokens of every kind, input and output.
    pub tokens: Option<u64>,
    /// Money, in US dollars.
    pub cost_usd: Option<f64>,
    /// Tool calls.
    pub tool_calls: Option<u64>,
    /// Wall time, in seconds.
    pub wall_time_secs: Option<u64>,
}

/// What was spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    /// Tokens.
    pub tokens: u64,
    /// US dollars.
    pub cost_usd: f64,
    /// Tool calls.
    pub tool_calls: u64,
}

/// A budget that was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// `tokens`, `cost`, `tool_calls` or `wall_time`, prefixed by the scope (`turn.tokens`).
    pub budget: String,
    /// What was spent against what limit.
    pub detail: String,
}

/// One budget scope: limits, spending, a start time and a parent.
#[derive(Debug)]
pub struct Scope {
    name: String,
    limits: Limits,
    spent: Mutex<Spent>,
    started: Instant,
    parent: Option<Arc<Scope>>,
}

impl Scope {
    /// A root scope.
    pub fn root(name: impl Into<String>, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            limits,
            spent: Mutex::new(Spent::default()),
            started: Instant::now(),
            parent: None,
        })
    }

    /// A scope under `parent`: what it spends counts against the parent too.
    pub fn child(parent: &Arc<Scope>, name: impl Into<String>, limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            limits,
            spent: Mutex::new(Spent::default()),
            started: Instant::now(),
            parent: Some(Arc::clone(parent)),
        })
    }

    /// A root scope starting from what was already spent (a bot's day so far).
    pub fn resumed(name: impl Into<String>, limits: Limits, spent: Spent) -> Arc<Self> {
        Arc::new(Self {
            name: name.into(),
            limits,
            spent: Mutex::new(spent),
            started: Instant::now(),
            parent: None,
        })
    }

    /// What this scope spent.
    pub fn spent(&self) -> Spent {
        *self.spent.lock()
    }

    /// Adds tokens and money, here and in every ancestor.
    pub fn charge_model(&self, tokens: u64, cost_usd: f64) {
        let mut scope = Some(self);
        while let Some(s) = scope {
            let mut spent = s.spent.lock();
            spent.tokens += tokens;
            spent.cost_usd += cost_usd;
            drop(spent);
            scope = s.parent.as_deref();
        }
    }

    /// Adds one tool call, here and in every ancestor.
    pub fn charge_tool_call(&self) {
        let mut scope = Some(self);
        while let Some(s) = scope {
            s.spent.lock().tool_calls += 1;
            scope = s.parent.as_deref();
        }
    }

    /// The first limit reached, here or in an ancestor.
    pub fn check(&self) -> Option<Exceeded> {
        let mut scope = Some(self);
        while let Some(s) = scope {
            if let Some(e) = s.check_own() {
                return Some(e);
            }
            scope = s.parent.as_deref();
        }
        None
    }

    /// How long until the nearest wall-time limit, here or above.
    pub fn time_left(&self) -> Option<Duration> {
        let mut left: Option<Duration> = None;
        let mut scope = Some(self);
        while let Some(s) = scope {
            if let Some(secs) = s.limits.wall_time_secs {
                let rest = Duration::from_secs(secs).saturating_sub(s.started.elapsed());
                left = Some(left.map_or(rest, |l| l.min(rest)));
            }
            scope = s.parent.as_deref();
        }
        left
    }

    fn check_own(&self) -> Option<Exceeded> {
        let spent = self.spent();
        let l = &self.limits;
        let name = &self.name;
        if let Some(max) = l.tokens.filter(|&m| spent.tokens >= m) {
            return Some(Exceeded {
                budget: format!("{name}.tokens"),
                detail: format!("{} of {max} tokens spent", spent.tokens),
            });
        }
        if let Some(max) = l.cost_usd.filter(|&m| spent.cost_usd >= m) {
            return Some(Exceeded {
                budget: format!("{name}.cost"),
                detail: format!("${:.4} of ${max:.4} spent", spent.cost_usd),
            });
        }
        if let Some(max) = l.tool_calls.filter(|&m| spent.tool_calls >= m) {
            return Some(Exceeded {
                budget: format!("{name}.tool_calls"),
                detail: format!("{} of {max} tool calls made", spent.tool_calls),
            });
        }
        if let Some(max) = l
            .wall_time_secs
            .filter(|&m| self.started.elapsed() >= Duration::from_secs(m))
        {
            return Some(Exceeded {
                budget: format!("{name}.wall_time"),
                detail: format!("{} s of {max} s used", self.started.elapsed().as_secs()),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_counts_up_the_chain_and_the_first_limit_names_itself() {
        let bot = Scope::root(
            "bot",
            Limits {
                tokens: Some(1000),
                ..Limits::default()
            },
        );
        let turn = Scope::child(
            &bot,
            "turn",
            Limits {
                tool_calls: Some(2),
                ..Limits::default()
            },
        );
        turn.charge_model(600, 0.01);
        assert_eq!(turn.check(), None);
        turn.charge_tool_call();
        turn.charge_tool_call();
        assert_eq!(
            turn.check(),
            Some(Exceeded {
                budget: "turn.tool_calls".into(),
                detail: "2 of 2 tool calls made".into()
            })
        );
        let next_turn = Scope::child(&bot, "turn", Limits::default());
        next_turn.charge_model(400, 0.0);
        assert_eq!(
            next_turn.check(),
            Some(Exceeded {
                budget: "bot.tokens".into(),
                detail: "1000 of 1000 tokens spent".into()
            })
        );
        assert_eq!(bot.spent().tool_calls, 2);
    }

    #[test]
    fn wall_time_zero_is_reached_at_once() {
        let scope = Scope::root(
            "delegation",
            Limits {
                wall_time_secs: Some(0),
                ..Limits::default()
            },
        );
        assert_eq!(scope.check().unwrap().budget, "delegation.wall_time");
        assert_eq!(scope.time_left(), Some(Duration::ZERO));
    }
}

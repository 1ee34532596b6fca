//! What the chat shows about a turn besides its text: a spinner with the
//! elapsed time while the model or a tool works (on a terminal only), and
//! one line of tokens and cost when the turn ends.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use troupe_runtime::protocol::Usage;

/// The spinner of a running turn: what is being waited for, and since when.
/// Off (draws nothing) when the output is not a terminal.
pub struct Activity {
    on: bool,
    bar: Option<ProgressBar>,
    /// The tool calls running now: id and name.
    running: Vec<(String, String)>,
}

impl Activity {
    /// A spinner that draws only when `on`.
    pub fn new(on: bool) -> Self {
        Self {
            on,
            bar: None,
            running: Vec::new(),
        }
    }

    /// The model is working.
    pub fn thinking(&mut self) {
        self.show("the model is working".into());
    }

    /// A tool call started.
    pub fn tool_started(&mut self, id: &str, name: &str) {
        self.running.push((id.to_owned(), name.to_owned()));
        self.show_running();
    }

    /// A tool call ended: the others still running, or the model again.
    pub fn tool_finished(&mut self, id: &str) {
        self.running.retain(|(i, _)| i != id);
        if self.running.is_empty() {
            self.thinking();
        } else {
            self.show_running();
        }
    }

    /// Takes the spinner off the screen (before text is written there).
    pub fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    /// Clears the spinner and forgets the running calls (the turn ended).
    pub fn done(&mut self) {
        self.running.clear();
        self.clear();
    }

    fn show_running(&mut self) {
        let names: Vec<&str> = self.running.iter().map(|(_, n)| n.as_str()).collect();
        self.show(format!("running {}", names.join(", ")));
    }

    fn show(&mut self, what: String) {
        self.clear();
        if !self.on {
            return;
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("  {spinner} {msg} · {elapsed}") {
            bar.set_style(style);
        }
        bar.set_message(what);
        bar.enable_steady_tick(Duration::from_millis(120));
        self.bar = Some(bar);
    }
}

impl Drop for Activity {
    fn drop(&mut self) {
        self.clear();
    }
}

/// The line after a turn: its tokens, cost, model calls and time.
pub fn turn_line(usage: &Usage, cost_usd: f64, steps: u32, elapsed: Duration) -> String {
    format!(
        "  · {} · {} · {} {} · {}",
        tokens(usage),
        dollars(cost_usd),
        steps,
        if steps == 1 {
            "model call"
        } else {
            "model calls"
        },
        seconds(elapsed)
    )
}

/// Tokens in and out, with the cached share when there is one.
pub fn tokens(usage: &Usage) -> String {
    let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    let mut text = format!("{} tokens in", grouped(input));
    if usage.cache_read_tokens > 0 {
        text.push_str(&format!(" ({} cached)", grouped(usage.cache_read_tokens)));
    }
    text.push_str(&format!(", {} out", grouped(usage.output_tokens)));
    text
}

/// A cost in dollars, with the digits a small one needs.
pub fn dollars(cost: f64) -> String {
    if cost == 0.0 {
        "$0".into()
    } else if cost < 0.01 {
        format!("${cost:.4}")
    } else {
        format!("${cost:.2}")
    }
}

fn seconds(elapsed: Duration) -> String {
    let s = elapsed.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m{:02}s", elapsed.as_secs() / 60, elapsed.as_secs() % 60)
    }
}

/// `1234567` as `1,234,567`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn the_turn_line_says_tokens_cost_calls_and_time() {
        let usage = Usage {
            input_tokens: 1200,
            output_tokens: 56,
            cache_read_tokens: 34_000,
            cache_write_tokens: 0,
        };
        assert_eq!(
            turn_line(&usage, 0.0123, 2, Duration::from_millis(3400)),
            "  · 35,200 tokens in (34,000 cached), 56 out · $0.01 · 2 model calls · 3.4 s"
        );
        assert_eq!(
            turn_line(&Usage::default(), 0.0, 1, Duration::from_secs(75)),
            "  · 0 tokens in, 0 out · $0 · 1 model call · 1m15s"
        );
        assert_eq!(dollars(0.00042), "$0.0004");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
    }
}

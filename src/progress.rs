//! Progress on long work (indicatif), on stderr and only on a terminal:
//! never in redirected output, never with `--json`. A spinner with the
//! elapsed time for work that cannot say how far it is (an npm install, a
//! `VACUUM INTO`), a bar for work that can (the kills of `bench crash`,
//! the bytes of `files put`).

use std::future::Future;
use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Whether progress may be drawn: stderr is a terminal and the output is
/// not JSON.
pub fn wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal()
}

/// A spinner saying `what` with the elapsed time, or nothing when `on` is
/// false.
pub fn spinner(on: bool, what: &str) -> ProgressBar {
    if !on {
        return ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// A bar of `len` steps (`bytes`: counted in bytes) saying `what`, or
/// nothing when `on` is false.
pub fn bar(on: bool, len: u64, what: &str, bytes: bool) -> ProgressBar {
    if !on {
        return ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template = if bytes {
        "{msg} [{bar:30}] {bytes}/{total_bytes} {elapsed}"
    } else {
        "{msg} [{bar:30}] {pos}/{len} {elapsed}"
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}

/// Runs `work` under a spinner saying `what` (when `on`), cleared at the end.
pub async fn during<T>(on: bool, what: &str, work: impl Future<Output = T>) -> T {
    let spinner = spinner(on, what);
    let out = work.await;
    spinner.finish_and_clear();
    out
}

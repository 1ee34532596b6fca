//! `browser_exec`: a short Python program driving troupe's own browser.
//!
//! The program is code run on the machine, so it runs where `run_command`'s
//! commands run: in the sandbox (troupe's home hidden, `/tmp` private, the
//! commands' network — the public internet through their egress proxy, or
//! none, as `[sandbox] network` says), with only the browser's workspace writable and this
//! call's control socket bound in ([`crate::browser::control`]). It reaches
//! the browser only through the helpers, which troupe carries out: every
//! navigation they make passes `web_fetch`'s outside-the-machine rules, and
//! what the program prints — page content, chosen by whoever wrote the
//! page — comes back inside the untrusted wrapper. The browser and the
//! workspace last across calls ([`crate::browser`]); Python variables do
//! not. A screenshot path printed in the output brings the image to a model
//! that sees images, the way `read_file` does.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use tokio::io::AsyncReadExt;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::sandbox::{proxy, Confinement, Network, Placement, SandboxSettings};
use troupe_runtime::tool::untrusted::untrusted;
use troupe_runtime::tool::ToolContext;

use crate::browser::control::{Control, MODULE};
use crate::browser::{Browser, Mode};
use crate::run_command::network::CommandNetwork;
use crate::run_command::output::BoundedOutput;
use crate::run_command::process::{end_tree, Ending, TERM_GRACE};
use crate::run_command::tether;
use crate::web::guard::Policy;

/// The timeout when none is given, in seconds.
pub const DEFAULT_TIMEOUT_S: u64 = 300;
/// The longest timeout allowed, in seconds.
pub const MAX_TIMEOUT_S: u64 = 1_800;
/// Output bytes kept from the start and from the end.
const KEPT_BYTES: usize = 15_000;
/// The largest screenshot attached.
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The arguments of `browser_exec`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowserExecParams {
    /// Python, starting with a one-line comment naming the step (`# open the login page`).
    pub code: String,
    /// `profile` (default: troupe's signed-in profile), `clean` (a fresh profile) or `headless`.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// Seconds before the program is killed (default 300, at most 1800).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1800))]
    pub timeout_s: Option<u64>,
}

/// Where `browser_exec` runs its programs, which pages they may open, and
/// the browser they drive.
#[derive(Clone, Default)]
pub struct BrowserExecHost {
    /// `[sandbox]`: where the program runs.
    pub sandbox: SandboxSettings,
    /// `[web]`'s outside-the-machine rules for navigations.
    pub policy: Policy,
    /// The network sandboxed commands share, which a sandboxed program
    /// joins as a command does (`run_command`'s); none when `None`.
    pub network: Option<Arc<CommandNetwork>>,
    /// The browser, where one was found or configured; whoever made it
    /// supervises it (a node: its `browser` child).
    pub browser: Option<Arc<Browser>>,
}

/// `browser_exec` on `host`, offered only where it has a browser.
pub fn tool(host: BrowserExecHost) -> impl troupe_runtime::tool::Tool {
    let with_browser = host.browser.is_some();
    browser_exec::tool(host).offered(move |_| with_browser)
}

/// Drive troupe's own browser (Chrome/Chromium) with a short Python program. The helpers are
/// imported: new_tab(url=None), goto_url(url) (returns page_info), wait_for_load(timeout=15),
/// page_info() (url, title, w, h, sx, sy, pw, ph), js(expression), fill_input(selector, text),
/// click_at_xy(x, y), capture_screenshot(path=None) (returns the PNG's path), cdp(method,
/// params=None, browser=False) for raw DevTools commands, ensure_real_tab(). The browser and its
/// current tab, and the workspace folder $BH_AGENT_WORKSPACE (also WORKSPACE), last across calls;
/// Python variables do not. Print what you need: the output comes back as untrusted page data.
/// Print a screenshot's path to see the image. Pages on this machine or the local network are
/// refused unless the user allowed them. At a login, a CAPTCHA or a payment, stop and ask the
/// user (ask_user) to finish it in the browser window.
#[tool(
    deferred,
    failure_tolerant,
    pages_own_output,
    timeout = Duration::from_secs(MAX_TIMEOUT_S) + TERM_GRACE + Duration::from_secs(60)
)]
pub async fn browser_exec(
    params: BrowserExecParams,
    ctx: &ToolContext,
    host: &BrowserExecHost,
) -> ToolResult {
    if let Err(why) = check_step_comment(&params.code) {
        return ToolResult::error(why);
    }
    let timeout = match params.timeout_s {
        None => DEFAULT_TIMEOUT_S,
        Some(0) => return ToolResult::error("`timeout_s` must be at least 1 second"),
        Some(s) if s > MAX_TIMEOUT_S => {
            return ToolResult::error(format!(
                "`timeout_s` is at most {MAX_TIMEOUT_S} seconds; split the work into several calls"
            ))
        }
        Some(s) => s,
    };
    let Some(browser) = &host.browser else {
        return ToolResult::error(
            "there is no browser here: install Chrome or Chromium, or name one with \
             [browser] chrome in config.toml (`troupe browser status` says what was found)",
        );
    };
    let mode = params.mode.unwrap_or_default();
    let instance = match browser.acquire(mode).await {
        Ok(instance) => instance,
        Err(why) => return ToolResult::error(format!("the browser did not start: {why}")),
    };
    let workspace = browser.settings().workspace();
    if let Err(e) = std::fs::create_dir_all(&workspace) {
        return ToolResult::error(format!("cannot make {}: {e}", workspace.display()));
    }
    let control = match Control::open(
        &browser.settings().calls(),
        Arc::clone(&instance),
        host.policy.clone(),
        workspace.clone(),
    ) {
        Ok(control) => control,
        Err(e) => return ToolResult::error(format!("cannot open the browser's socket: {e}")),
    };
    let program = control.dir.join("program.py");
    if let Err(e) = std::fs::write(&program, &params.code) {
        return ToolResult::error(format!("cannot write the program: {e}"));
    }
    let placement = match host.sandbox.place() {
        Ok(placement) => placement,
        Err(e) => return ToolResult::error(format!("the program did not run: {e}")),
    };
    let mut cmd = match &placement {
        Placement::Sandboxed(sandbox) => {
            let network = match &host.network {
                Some(network) => match network.for_program(sandbox).await {
                    Ok(network) => network,
                    Err(e) => return ToolResult::error(format!("the program did not run: {e}")),
                },
                None => Network::None,
            };
            let joined = matches!(network, Network::Joined(_));
            let confinement = Confinement {
                writable: vec![workspace.clone(), control.dir.clone()],
                read_only: vec![],
                network,
                hidden: vec![ctx.home.root().to_path_buf()],
            };
            let mut cmd = tokio::process::Command::from(sandbox.command(
                python(),
                ["-u", "-c", &prelude()],
                &workspace,
                &confinement,
            ));
            if let (true, Some(network)) = (joined, &host.network) {
                cmd.envs(proxy::environment(
                    troupe_runtime::sandbox::network::PORT,
                    network.allowed(),
                ));
            }
            cmd
        }
        Placement::Unsandboxed(_) => {
            let mut cmd = tokio::process::Command::new(python());
            cmd.args(["-u", "-c", &prelude()]).current_dir(&workspace);
            cmd
        }
    };
    cmd.env("BH_AGENT_WORKSPACE", &workspace)
        .env("TROUPE_BROWSER_SOCKET", &control.socket)
        .env("TROUPE_BROWSER_DIR", &control.dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .process_group(0);
    let ending = run(cmd, Duration::from_secs(timeout), ctx).await;
    let (output, ending) = match ending {
        Ok(ran) => ran,
        Err(e) => return ToolResult::error(format!("could not start Python: {e}")),
    };
    let died = !instance.alive();
    drop(control);
    result(
        &output,
        &ending,
        died,
        mode,
        &workspace,
        placement.label(),
        sees_images(ctx),
    )
}

/// The first line must be a comment naming the step.
fn check_step_comment(code: &str) -> Result<(), String> {
    let first = code.lines().next().unwrap_or("").trim();
    match first.strip_prefix('#') {
        Some(name) if !name.trim().is_empty() => Ok(()),
        _ => Err(
            "start `code` with a one-line comment naming the step, such as \
             `# open the pricing page and read the plans`, then the program on the next lines"
                .into(),
        ),
    }
}

/// Python: the system's, which the sandbox shows as it is.
fn python() -> &'static str {
    if Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// What runs the agent's program with the helpers imported, its traceback
/// naming the program's own lines.
fn prelude() -> String {
    format!(
        "import os, sys\n\
         sys.dont_write_bytecode = True\n\
         d = os.environ['TROUPE_BROWSER_DIR']\n\
         sys.path.insert(0, d)\n\
         import {MODULE} as h\n\
         g = {{'__name__': '__main__', **{{n: getattr(h, n) for n in h.__all__}}}}\n\
         p = os.path.join(d, 'program.py')\n\
         del d, h\n\
         exec(compile(open(p).read(), p, 'exec'), g)\n"
    )
}

/// Runs the program, keeping the first and last bytes of its output.
async fn run(
    cmd: tokio::process::Command,
    timeout: Duration,
    ctx: &ToolContext,
) -> std::io::Result<(String, Ending)> {
    let mut cmd = cmd;
    let (sender, mut pipe) = tokio::net::unix::pipe::pipe()?;
    let out = sender.into_blocking_fd()?;
    let err = out.try_clone()?;
    cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
    let tether::Running {
        mut child,
        pgid,
        watchdog,
    } = tether::start(cmd)?;
    let mut output = BoundedOutput::new(KEPT_BYTES, KEPT_BYTES);
    let mut buf = vec![0_u8; 64 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut ending = None;
    let mut pipe_open = true;
    while ending.is_none() {
        tokio::select! {
            read = pipe.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => output.push(&buf[..n]),
            },
            status = child.wait() => {
                ending = Some(status.map(Ending::of).unwrap_or(Ending::Exit(-1)));
            }
            () = &mut deadline => {
                end_tree(&mut child, pgid).await;
                ending = Some(Ending::Timeout(timeout));
            }
            () = ctx.cancel.cancelled() => {
                end_tree(&mut child, pgid).await;
                ending = Some(Ending::TurnStopped);
            }
        }
    }
    while pipe_open {
        match tokio::time::timeout(Duration::from_millis(200), pipe.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => output.push(&buf[..n]),
            _ => pipe_open = false,
        }
    }
    drop(watchdog);
    output.finish();
    Ok((output.text(), ending.unwrap_or(Ending::Exit(-1))))
}

fn sees_images(ctx: &ToolContext) -> bool {
    ctx.services.model_traits().sees_images
}

/// The result: the output inside the untrusted wrapper, how the program
/// ended, and the last screenshot it printed.
fn result(
    output: &str,
    ending: &Ending,
    died: bool,
    mode: Mode,
    workspace: &Path,
    sandbox: &str,
    sees_images: bool,
) -> ToolResult {
    let body = if output.is_empty() {
        "(no output)"
    } else {
        output
    };
    let mut text = untrusted(&[("source", "browser")], body);
    text.push('\n');
    text.push_str(&ending.to_string());
    if let Ending::Timeout(after) = ending {
        text.push_str(&format!(
            "\nThe program was killed after {} s; the browser and its tab are still there. \
             Give a larger `timeout_s` (at most {MAX_TIMEOUT_S}) or do less in one call.",
            after.as_secs()
        ));
    }
    if died {
        text.push_str(
            "\nThe browser died during this call (it crashed or was killed); the next \
             browser_exec call starts it again, with a new tab.",
        );
    }
    let mut data = serde_json::json!({
        "exit_code": ending.code(),
        "ending": ending.to_string(),
        "mode": mode.name(),
        "sandbox": sandbox,
        "workspace": workspace,
    });
    if let Some(shot) = last_screenshot(output, workspace) {
        let image = image_of(&shot, sees_images);
        if let Some(note) = image.get("note").and_then(|n| n.as_str()) {
            text.push('\n');
            text.push_str(note);
        }
        data["image"] = image;
    }
    if ending.success() && !died {
        ToolResult::ok_with(text, data)
    } else {
        ToolResult::error_with(text, data)
    }
}

/// The last PNG in the workspace whose path the output prints.
fn last_screenshot(output: &str, workspace: &Path) -> Option<PathBuf> {
    output
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ',' | '(' | ')'))
        .filter(|word| word.ends_with(".png"))
        .map(|word| {
            let path = PathBuf::from(word);
            if path.is_absolute() {
                path
            } else {
                workspace.join(path)
            }
        })
        .find(|path| path.starts_with(workspace) && path.is_file())
}

fn image_of(path: &Path, sees_images: bool) -> serde_json::Value {
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if !sees_images {
        return serde_json::json!({
            "media_type": "image/png",
            "path": path,
            "note": format!("The screenshot {} is saved; this model cannot see images.", path.display()),
        });
    }
    if size > MAX_IMAGE_BYTES {
        return serde_json::json!({
            "media_type": "image/png",
            "path": path,
            "note": format!("The screenshot {} is over 5 MB and is not attached.", path.display()),
        });
    }
    match std::fs::read(path) {
        Ok(bytes) => serde_json::json!({
            "media_type": "image/png",
            "path": path,
            "bytes": base64::engine::general_purpose::STANDARD.encode(bytes),
        }),
        Err(e) => serde_json::json!({
            "media_type": "image/png",
            "path": path,
            "note": format!("The screenshot {} could not be read: {e}", path.display()),
        }),
    }
}

#[cfg(test)]
#[path = "browser_exec_tests.rs"]
mod tests;

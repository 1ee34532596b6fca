//! The helpers' work on a running browser: one tab at a time, kept across
//! calls, driven over the DevTools protocol.
//!
//! Each helper the Python module offers is one request here
//! ([`Instance::helper`]). The current tab lives in the [`Instance`], not
//! in the program, so the next `browser_exec` call finds the page where the
//! last one left it. Every navigation the helpers make (`goto_url`,
//! `new_tab` with an address, a raw `Page.navigate` or
//! `Target.createTarget`) passes the same outside-the-machine rules as
//! `web_fetch` ([`crate::web::guard`]) before the browser is asked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use parking_lot::Mutex;
use serde_json::{json, Value};
use url::Url;

use super::cdp::{Cdp, CdpError};
use super::chrome::Process;
use crate::web::guard::{self, Policy};

/// How long `wait_for_load` waits when not told.
const LOAD_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the page's load state is read again while waiting for its
/// load event.
const LOAD_POLL: Duration = Duration::from_millis(25);

/// One running browser: its process, its DevTools connection, its tab.
pub struct Instance {
    /// The browser's process (ended when the instance is dropped).
    pub process: Mutex<Process>,
    /// The browser-wide DevTools connection.
    pub cdp: Cdp,
    /// The current tab: its target id and its session.
    tab: Mutex<Option<Tab>>,
    /// Ends the browser's egress proxy with the instance.
    _egress: tokio_util::sync::DropGuard,
}

#[derive(Debug, Clone)]
struct Tab {
    target: String,
    session: String,
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.cdp.close();
        self.process.lock().stop();
    }
}

impl Instance {
    /// Connects to a started browser, whose egress proxy ends when `egress`
    /// is dropped (with the instance).
    pub async fn connect(
        process: Process,
        egress: tokio_util::sync::DropGuard,
    ) -> Result<Self, String> {
        let cdp = Cdp::connect(&process.endpoint)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Self {
            process: Mutex::new(process),
            cdp,
            tab: Mutex::new(None),
            _egress: egress,
        })
    }

    /// Whether the browser is still running.
    pub fn alive(&self) -> bool {
        !self.cdp.is_closed() && !*self.process.lock().exited.borrow()
    }

    /// Runs the helper `name` with `args`; the value goes back to Python.
    pub async fn helper(
        &self,
        name: &str,
        args: &Value,
        policy: &Policy,
        workspace: &Path,
    ) -> Result<Value, String> {
        let outcome = match name {
            "ensure_real_tab" => self.ensure_real_tab().await,
            "new_tab" => self.new_tab(opt_str(args, "url"), policy).await,
            "goto_url" => self.goto_url(str_arg(args, "url")?, policy).await,
            "wait_for_load" => {
                let timeout = args
                    .get("timeout")
                    .and_then(Value::as_f64)
                    .map(|s| Duration::from_secs_f64(s.clamp(0.0, 600.0)))
                    .unwrap_or(LOAD_TIMEOUT);
                self.wait_for_load(timeout).await
            }
            "page_info" => self.page_info().await,
            "js" => self.js(str_arg(args, "expression")?).await,
            "fill_input" => {
                self.fill_input(str_arg(args, "selector")?, str_arg(args, "text")?)
                    .await
            }
            "click_at_xy" => {
                let x = num_arg(args, "x")?;
                let y = num_arg(args, "y")?;
                let clicks = args.get("clicks").and_then(Value::as_u64).unwrap_or(1);
                self.click_at_xy(x, y, clicks).await
            }
            "capture_screenshot" => {
                self.capture_screenshot(opt_str(args, "path"), workspace)
                    .await
            }
            "cdp" => {
                let method = str_arg(args, "method")?;
                let params = args.get("params").cloned().unwrap_or_else(|| json!({}));
                let browser_wide = args.get("browser").and_then(Value::as_bool) == Some(true);
                self.raw(method, params, browser_wide, policy).await
            }
            other => return Err(format!("there is no browser helper `{other}`")),
        };
        outcome.map_err(|e| match e {
            Failure::Cdp(CdpError::Closed) => {
                "the browser died or was stopped during this call; the next browser_exec call \
                 starts it again"
                    .to_owned()
            }
            Failure::Cdp(e) => e.to_string(),
            Failure::Refused(why) => why,
        })
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, Failure> {
        let tab = self.tab().await?;
        Ok(self.cdp.call(method, params, Some(&tab.session)).await?)
    }

    /// The current tab, made or found when there is none.
    async fn tab(&self) -> Result<Tab, Failure> {
        if let Some(tab) = self.tab.lock().clone() {
            return Ok(tab);
        }
        self.ensure_real_tab().await?;
        self.tab
            .lock()
            .clone()
            .ok_or_else(|| Failure::Refused("no tab could be opened".into()))
    }

    async fn ensure_real_tab(&self) -> Result<Value, Failure> {
        let current = self.tab.lock().clone();
        let targets = self.cdp.call("Target.getTargets", json!({}), None).await?;
        let pages: Vec<&Value> = targets["targetInfos"]
            .as_array()
            .map(|t| t.iter().filter(|t| t["type"] == "page").collect())
            .unwrap_or_default();
        if let Some(tab) = current {
            if let Some(info) = pages.iter().find(|t| t["targetId"] == tab.target.as_str()) {
                return Ok(
                    json!({"target_id": tab.target, "url": info["url"], "title": info["title"]}),
                );
            }
        }
        // A real page, not the browser's own (settings, new-tab, devtools).
        let real = pages.iter().find(|t| {
            let url = t["url"].as_str().unwrap_or("");
            !url.starts_with("chrome://") && !url.starts_with("devtools://")
        });
        let (target, url, title) = match real {
            Some(info) => (
                info["targetId"].as_str().unwrap_or_default().to_owned(),
                info["url"].clone(),
                info["title"].clone(),
            ),
            None => (self.create_target().await?, json!("about:blank"), json!("")),
        };
        self.attach(&target).await?;
        Ok(json!({"target_id": target, "url": url, "title": title}))
    }

    async fn create_target(&self) -> Result<String, Failure> {
        let made = self
            .cdp
            .call("Target.createTarget", json!({"url": "about:blank"}), None)
            .await?;
        Ok(made["targetId"].as_str().unwrap_or_default().to_owned())
    }

    async fn attach(&self, target: &str) -> Result<(), Failure> {
        let attached = self
            .cdp
            .call(
                "Target.attachToTarget",
                json!({"targetId": target, "flatten": true}),
                None,
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let _ = self
            .cdp
            .call("Target.activateTarget", json!({"targetId": target}), None)
            .await;
        // Its load events, which navigations wait on.
        self.cdp
            .call("Page.enable", json!({}), Some(&session))
            .await?;
        *self.tab.lock() = Some(Tab {
            target: target.to_owned(),
            session,
        });
        Ok(())
    }

    async fn new_tab(&self, url: Option<&str>, policy: &Policy) -> Result<Value, Failure> {
        if let Some(url) = url {
            check_navigation(url, policy).await?;
        }
        let target = self.create_target().await?;
        self.attach(&target).await?;
        match url {
            Some(url) => self.goto_url(url, policy).await,
            None => Ok(json!({"target_id": target})),
        }
    }

    async fn goto_url(&self, url: &str, policy: &Policy) -> Result<Value, Failure> {
        check_navigation(url, policy).await?;
        let tab = self.tab().await?;
        let loaded = self
            .cdp
            .next_event("Page.loadEventFired", Some(&tab.session));
        let went = self
            .cdp
            .call("Page.navigate", json!({"url": url}), Some(&tab.session))
            .await?;
        if let Some(error) = went["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(Failure::Refused(format!(
                "{url} did not load: {error}{}",
                if error.contains("TUNNEL") || error.contains("PROXY") {
                    " (troupe's browser opens only public pages unless [web] allows more)"
                } else {
                    ""
                }
            )));
        }
        // A new document fires its load event; a same-document navigation
        // (another `#fragment`) has none to wait for.
        if went.get("loaderId").is_some() {
            let _ = tokio::time::timeout(LOAD_TIMEOUT, loaded).await;
            self.wait_for_load(LOAD_TIMEOUT).await?;
        }
        self.page_info().await
    }

    /// Waits until the page's `document.readyState` is `complete`: woken by
    /// its load event, read again at least every [`LOAD_POLL`] (a page
    /// loaded by its own script fires none this tab was asked for).
    async fn wait_for_load(&self, timeout: Duration) -> Result<Value, Failure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let tab = self.tab().await?;
        loop {
            let loaded = self
                .cdp
                .next_event("Page.loadEventFired", Some(&tab.session));
            let state = self
                .evaluate("document.readyState")
                .await
                .unwrap_or(Value::Null);
            if state == "complete" {
                return Ok(Value::Bool(true));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Value::Bool(false));
            }
            tokio::select! {
                _ = loaded => {}
                () = tokio::time::sleep(LOAD_POLL) => {}
            }
        }
    }

    async fn page_info(&self) -> Result<Value, Failure> {
        self.evaluate(
            "(() => { const d = document.documentElement || {}; \
              return {url: location.href, title: document.title, w: innerWidth, h: innerHeight, \
              sx: scrollX, sy: scrollY, pw: d.scrollWidth || 0, ph: d.scrollHeight || 0}; })()",
        )
        .await
    }

    async fn js(&self, expression: &str) -> Result<Value, Failure> {
        self.evaluate(expression).await
    }

    async fn evaluate(&self, expression: &str) -> Result<Value, Failure> {
        let out = self
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await?;
        if let Some(details) = out.get("exceptionDetails") {
            let text = details["exception"]["description"]
                .as_str()
                .or_else(|| details["text"].as_str())
                .unwrap_or("the script threw an exception");
            return Err(Failure::Refused(format!("JavaScript error: {text}")));
        }
        Ok(out["result"].get("value").cloned().unwrap_or(Value::Null))
    }

    async fn fill_input(&self, selector: &str, text: &str) -> Result<Value, Failure> {
        let selector_json = Value::String(selector.to_owned()).to_string();
        let found = self
            .evaluate(&format!(
                "(() => {{ const e = document.querySelector({selector_json}); if (!e) return false; \
                 e.focus(); if ('value' in e) {{ e.value = ''; }} return true; }})()"
            ))
            .await?;
        if found != Value::Bool(true) {
            return Err(Failure::Refused(format!(
                "no element matches the selector {selector_json} on this page"
            )));
        }
        self.call("Input.insertText", json!({"text": text})).await?;
        self.evaluate(&format!(
            "(() => {{ const e = document.querySelector({selector_json}); \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); \
             e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()"
        ))
        .await
    }

    async fn click_at_xy(&self, x: f64, y: f64, clicks: u64) -> Result<Value, Failure> {
        self.call(
            "Input.dispatchMouseEvent",
            json!({"type": "mouseMoved", "x": x, "y": y}),
        )
        .await?;
        for count in 1..=clicks.clamp(1, 3) {
            for kind in ["mousePressed", "mouseReleased"] {
                self.call(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": count}),
                )
                .await?;
            }
        }
        Ok(Value::Bool(true))
    }

    async fn capture_screenshot(
        &self,
        path: Option<&str>,
        workspace: &Path,
    ) -> Result<Value, Failure> {
        let shot = self
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap_or_default())
            .map_err(|e| Failure::Refused(format!("the screenshot was not readable: {e}")))?;
        let file = match path {
            Some(path) if Path::new(path).is_absolute() => PathBuf::from(path),
            Some(path) => workspace.join(path),
            None => workspace.join(format!(
                "screenshot-{}.png",
                chrono::Utc::now().format("%Y%m%d-%H%M%S%.3f")
            )),
        };
        if !file.starts_with(workspace) || file.components().any(|c| c.as_os_str() == "..") {
            return Err(Failure::Refused(format!(
                "a screenshot is saved in the workspace {}; give a path inside it",
                workspace.display()
            )));
        }
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Failure::Refused(e.to_string()))?;
        }
        std::fs::write(&file, bytes)
            .map_err(|e| Failure::Refused(format!("cannot save {}: {e}", file.display())))?;
        Ok(Value::String(file.display().to_string()))
    }

    async fn raw(
        &self,
        method: &str,
        params: Value,
        browser_wide: bool,
        policy: &Policy,
    ) -> Result<Value, Failure> {
        if matches!(method, "Page.navigate" | "Target.createTarget") {
            if let Some(url) = params.get("url").and_then(Value::as_str) {
                check_navigation(url, policy).await?;
            }
        }
        if browser_wide {
            Ok(self.cdp.call(method, params, None).await?)
        } else {
            self.call(method, params).await
        }
    }
}

/// Why a helper failed.
enum Failure {
    Cdp(CdpError),
    Refused(String),
}

impl From<CdpError> for Failure {
    fn from(e: CdpError) -> Self {
        Self::Cdp(e)
    }
}

/// Checks an address a helper is about to open: `about:blank` and the
/// like, or a page the `web_fetch` rules let through (its host's every
/// address public, unless `[web]` allows it).
async fn check_navigation(url: &str, policy: &Policy) -> Result<(), Failure> {
    if url == "about:blank" {
        return Ok(());
    }
    let parsed = Url::parse(url).map_err(|e| {
        Failure::Refused(format!(
            "`{url}` is not an address ({e}); give a full http:// or https:// URL"
        ))
    })?;
    let refuse =
        |e: guard::Refusal| Failure::Refused(e.to_string().replace("web_fetch", "the browser"));
    guard::check_url(&parsed, policy).map_err(refuse)?;
    if let Some(url::Host::Domain(name)) = parsed.host() {
        if !policy.allow_private {
            let port = parsed.port_or_known_default().unwrap_or(80);
            let addresses = tokio::net::lookup_host((name, port))
                .await
                .map_err(|e| Failure::Refused(format!("`{name}` could not be resolved: {e}")))?;
            for address in addresses {
                if let Some(kind) = policy.refusal(address.ip()) {
                    return Err(refuse(guard::Refusal::Address {
                        host: name.to_owned(),
                        ip: address.ip(),
                        kind,
                        resolved: true,
                    }));
                }
            }
        }
    }
    Ok(())
}

fn str_arg<'a>(args: &'a Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{name}` is required and must be a string"))
}

fn opt_str<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

fn num_arg(args: &Value, name: &str) -> Result<f64, String> {
    args.get(name)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("`{name}` is required and must be a number"))
}

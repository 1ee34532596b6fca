//! Building a [`Runtime`]: the home locked and checked, the configuration
//! read and layered, the node started with its tools, its routines and its
//! browser.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use troupe_actors::added_tools::AddedTools;
use troupe_actors::node::{Node, NodeOptions};
use troupe_actors::routine::scheduler::{RoutineService, SchedulerHandle, SchedulerOptions, Wake};
use troupe_actors::routine::{CatchUp, Clock};
use troupe_actors::settings::Settings;
use troupe_runtime::config::Config;
use troupe_runtime::home::{Home, HomeLock};
use troupe_runtime::model::{ModelsConfig, Provider, ResolvedModel};
use troupe_runtime::tool::Tool;

use super::{Runtime, RuntimeError};

/// A change to the actors' settings, applied after the configuration is read.
type AdjustSettings = Box<dyn FnOnce(&mut Settings) + Send>;

/// Builds a [`Runtime`].
#[derive(Default)]
pub struct RuntimeBuilder {
    home: Option<PathBuf>,
    model: Option<String>,
    provider: Option<Arc<dyn Provider>>,
    tools: Vec<Arc<dyn Tool>>,
    overrides: Vec<(String, String)>,
    durable: Option<bool>,
    settings: Option<AdjustSettings>,
    cwd: Option<PathBuf>,
    bus: Option<tokio::sync::broadcast::Sender<troupe_actors::events::NodeEvent>>,
    scheduler: bool,
    clock: Option<Arc<dyn Clock>>,
    no_recovery: bool,
    env: Option<troupe_actors::node::EnvLookup>,
}

impl RuntimeBuilder {
    /// The home folder (default: `$TROUPE_HOME`, else `~/.troupe`).
    pub fn home(mut self, home: impl Into<PathBuf>) -> Self {
        self.home = Some(home.into());
        self
    }

    /// The default model spec (`openai:gpt-4o-mini`, `script:demo.json`, a `models.toml` name).
    pub fn model(mut self, spec: impl Into<String>) -> Self {
        self.model = Some(spec.into());
        self
    }

    /// A provider every bot talks to, whatever its spec (tests, custom clients).
    pub fn provider(mut self, provider: Arc<dyn Provider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Adds a tool of your own, after the built-in ones.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The home it was given (`None`: `$TROUPE_HOME` or `~/.troupe`).
    #[cfg(feature = "cli")]
    pub(crate) fn home_dir(&self) -> Option<&std::path::Path> {
        self.home.as_deref()
    }

    /// A config override, as a dotted key (`agent.max_steps_per_turn`, `"5"`).
    pub fn set(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.overrides.push((key.into(), value.into()));
        self
    }

    /// Turns the commit of every message off (measurements only).
    pub fn durable(mut self, durable: bool) -> Self {
        self.durable = Some(durable);
        self
    }

    /// Looks environment variables up with `lookup` instead of in the
    /// process's environment: models' keys and base URLs, `TROUPE_*`
    /// overrides, tools' keys. Tests give a model its key this way
    /// without touching the process's environment.
    pub fn env(mut self, lookup: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        self.env = Some(Arc::new(lookup));
        self
    }

    /// The working folder tools resolve relative paths against.
    pub fn cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// Publishes every conversation's events on `bus`, from the start
    /// (turns resumed after a crash included).
    pub fn event_bus(
        mut self,
        bus: tokio::sync::broadcast::Sender<troupe_actors::events::NodeEvent>,
    ) -> Self {
        self.bus = Some(bus);
        self
    }

    /// Fires the home's routines while the runtime runs (off by default, so
    /// short commands never fire them; `serve` and `chat` turn it on).
    pub fn scheduler(mut self, on: bool) -> Self {
        self.scheduler = on;
        self
    }

    /// The clock routines are scheduled by (tests: a
    /// [`troupe_actors::routine::VirtualClock`]). The scheduler then has no
    /// timers: it looks when told, [`SchedulerHandle::tick`].
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Whether the node resumes what a crash interrupted — turns left
    /// open, undelivered messages, unfinished subagents (on by default).
    /// `troupe run` turns it off: one turn does not spend its model on
    /// other conversations; `serve` and `chat` resume them.
    pub fn recover(mut self, on: bool) -> Self {
        self.no_recovery = !on;
        self
    }

    /// Adjusts the actors' settings after the configuration is read.
    pub fn settings(mut self, f: impl FnOnce(&mut Settings) + Send + 'static) -> Self {
        self.settings = Some(Box::new(f));
        self
    }

    /// Takes the home's lock, creates or completes the home, checks its
    /// database when the last owner did not end cleanly, reads the
    /// configuration and starts the node.
    ///
    /// # Errors
    ///
    /// [`RuntimeError::Home`] when another process owns the home (it is
    /// named), [`RuntimeError::Store`] when its database is damaged or
    /// missing, and what kept the configuration or the node from starting.
    pub async fn build(mut self) -> Result<Runtime, RuntimeError> {
        let home = self
            .home
            .take()
            .map(Home::new)
            .unwrap_or_else(Home::from_env);
        let lock = HomeLock::acquire(&home)?;
        let (lock, checked) = tokio::task::spawn_blocking(move || {
            let mut lock = lock;
            let checked = troupe_runtime::config::ensure_home(lock.home())
                .map_err(RuntimeError::from)
                .and_then(|_| Ok(lock.check_database()?));
            (lock, checked)
        })
        .await
        .map_err(|e| RuntimeError::Check(e.to_string()))?;
        let started = match checked {
            Ok(()) => self.start(home).await,
            Err(e) => Err(e),
        };
        match started {
            Ok((node, scheduler, config, added)) => Ok(Runtime {
                node,
                scheduler,
                added,
                config: Arc::new(config),
                lock: Arc::new(Mutex::new(Some(lock))),
            }),
            Err(e) => {
                // Nothing ran: the end is clean (unless the database was
                // suspect and is still unchecked, which the lock keeps).
                if let Err(release) = lock.release() {
                    tracing::warn!(error = %release, "the home's lock file could not be updated");
                }
                Err(e)
            }
        }
    }

    /// Reads the configuration of `home` (locked and checked) and starts
    /// the node and, when asked, the scheduler.
    async fn start(
        mut self,
        home: Home,
    ) -> Result<(Node, Option<SchedulerHandle>, Config, Arc<AddedTools>), RuntimeError> {
        let lookup: troupe_actors::node::EnvLookup = self
            .env
            .take()
            .unwrap_or_else(|| Arc::new(|k: &str| std::env::var(k).ok()));
        let env = |k: &str| lookup(k);
        let config = Config::load(&home, &env, &self.overrides)?;
        let models = ModelsConfig::load(&home.models_file())?;
        let mut settings = settings_from(&config, self.cwd);
        if let Some(spec) = self.model {
            settings.default_model = spec;
        }
        if let Some(durable) = self.durable {
            settings.durable = durable;
        }
        if let Some(adjust) = self.settings {
            adjust(&mut settings);
        }
        let model_override = self.provider.map(|provider| ResolvedModel {
            spec: "custom".into(),
            context_window: provider.context_window(),
            sees_images: provider.sees_images(),
            provider,
            model: "custom".into(),
            max_output_tokens: None,
            pricing: Default::default(),
        });
        say_where_commands_run(&config.sandbox, self.scheduler);
        // Sandboxed commands' network is held by the environments' helper.
        let mut sandbox = config.sandbox.clone();
        sandbox.helper = Some(troupe_actors::environment::helper_program(
            &config.environments,
        ));
        let browser = browser(&config, &home);
        let mut tools = troupe_tools::builtin_configured(
            sandbox,
            &config.tools,
            &config.web,
            Arc::clone(&lookup),
            browser.clone(),
        );
        for tool in self.tools {
            tools.register(tool)?;
        }
        // The user's MCP servers: their tools follow the built-in ones.
        let mcp = troupe_actors::mcp::McpServers::new(
            troupe_actors::mcp::load_config(&home, &env),
            settings.cwd.clone(),
        );
        // Tools the program adds while it runs (`Runtime::add_tool`).
        let added = Arc::new(AddedTools::new(&tools));
        tools.add_source(Arc::new(mcp.clone()));
        tools.add_source(Arc::clone(&added) as Arc<dyn troupe_runtime::tool::registry::ToolSource>);
        let questions = Arc::new(troupe_actors::channel::Questions::default());
        // The guardian is a call to the default model, when that is a real
        // endpoint; otherwise risky commands are asked of the user.
        let guardian = match &model_override {
            Some(_) => None,
            None => troupe_runtime::model::resolve(
                &settings.default_model,
                &models,
                &env,
                &settings.cwd,
            )
            .ok()
            .filter(|m| m.provider.name() != "script"),
        };
        let gate = crate::gate::for_config(
            &config,
            &home,
            Arc::clone(&questions),
            guardian.as_ref(),
            settings.ask_timeout,
        )?;
        let node = Node::start(NodeOptions {
            home,
            settings,
            models,
            model_override,
            tools,
            gate: Some(Arc::new(gate)),
            questions,
            bus: self.bus,
            env: Arc::clone(&lookup),
            recover: !self.no_recovery,
        })
        .await?;
        mcp.start(&node).await?;
        if let Some(browser) = browser {
            // The Browser actor, under the node's supervisor.
            node.supervise(browser.child()).await?;
        }
        let routines = routine_options(&config, self.clock);
        let scheduler = if self.scheduler {
            Some(SchedulerHandle::start(&node, routines).await?)
        } else {
            RoutineService::configure(&node, routines);
            None
        };
        Ok((node, scheduler, config, added))
    }
}

/// Says when commands will not run in a sandbox: without one, troupe's
/// home is protected only by the gate asking. Finding out runs `bwrap`
/// once, which a one-turn start should not wait for: a long-running node
/// (`serve`, `chat`: `at_start`) finds out at once, in the background,
/// and says so at start; any other finds out at its first command (the
/// gate and the tool share the cached answer, which says so then).
fn say_where_commands_run(settings: &troupe_runtime::sandbox::SandboxSettings, at_start: bool) {
    use troupe_runtime::sandbox::{Sandbox, SandboxMode};
    match settings.mode {
        SandboxMode::Off => tracing::warn!(
            "commands run UNSANDBOXED ([sandbox] mode = \"off\"): {}",
            troupe_runtime::trust::UNSANDBOXED_GATE
        ),
        SandboxMode::Auto | SandboxMode::Required if at_start => {
            std::thread::spawn(|| {
                let _ = Sandbox::detect();
            });
        }
        SandboxMode::Auto | SandboxMode::Required => {}
    }
}

/// The browser `browser_exec` drives, when `[browser]` names one or one
/// is on `PATH` (its actor starts under the node's supervisor); without
/// one, the tool is not offered and `troupe doctor` says why.
fn browser(config: &Config, home: &Home) -> Option<Arc<troupe_tools::browser::Browser>> {
    use troupe_tools::browser::{Browser, BrowserSettings};
    match BrowserSettings::configured(config, home) {
        Ok(settings) => Some(Browser::new(settings)),
        Err(why) => {
            tracing::debug!("browser_exec is not offered: {why}");
            None
        }
    }
}

/// The scheduler's options from `[routines]`, on `clock` (the system's when `None`).
fn routine_options(config: &Config, clock: Option<Arc<dyn Clock>>) -> SchedulerOptions {
    let defaults = SchedulerOptions::default();
    SchedulerOptions {
        wake: if clock.is_some() {
            Wake::Manual
        } else {
            Wake::Timers
        },
        clock: clock.unwrap_or(defaults.clock),
        lease: std::time::Duration::from_secs(config.routines.lease_secs.max(1)),
        catch_up: match config.routines.catch_up {
            troupe_runtime::config::CatchUp::Skip => CatchUp::Skip,
            troupe_runtime::config::CatchUp::RunOnce => CatchUp::RunOnce,
        },
        holder: defaults.holder,
    }
}

/// Turns `config.toml` into the actors' settings.
pub fn settings_from(config: &Config, cwd: Option<PathBuf>) -> Settings {
    let budget = |b: &troupe_runtime::config::Budget| troupe_actors::budget::Limits {
        tokens: b.tokens,
        cost_usd: b.cost_usd,
        tool_calls: b.tool_calls.map(u64::from),
        wall_time_secs: b.wall_time_secs,
    };
    let cwd = cwd
        .or_else(|| config.agent.working_dir.clone())
        .unwrap_or_else(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")));
    Settings {
        default_model: config.agent.model.clone(),
        cwd,
        user_home: troupe_runtime::home::Home::user_home(),
        timezone: config.agent.timezone.name().to_string(),
        max_steps: config.agent.max_steps_per_turn,
        repeat_limit: config.agent.repeated_failure_limit,
        tool_timeout: config.agent.tool_timeout(),
        spill_limit_chars: config.agent.spill_limit_chars as usize,
        compaction_threshold: config.compaction.threshold,
        keep_recent: config.compaction.keep_recent_messages as usize,
        turn_budget: budget(&config.budgets.per_turn),
        bot_budget: budget(&config.budgets.per_bot_day),
        delegation_budget: budget(&config.budgets.per_delegation),
        durable: true,
        max_subagents_per_bot: config.delegation.max_concurrent_per_bot as usize,
        max_subagents_per_node: config.delegation.max_concurrent_per_node as usize,
        subagent_timeout: config.delegation.child_timeout(),
        max_delegation_depth: config.delegation.max_depth,
        loop_max_exchanges: config.messaging.loop_max_exchanges,
        loop_window: std::time::Duration::from_secs(config.messaging.loop_window_secs),
        loop_cooldown: std::time::Duration::from_secs(config.messaging.loop_cooldown_secs),
        ask_timeout: std::time::Duration::from_secs(600),
        redeliver_after: Some(std::time::Duration::from_secs(60)),
        files: config.files.limits(),
        environments: config.environments.clone(),
        executors: config.executors.clone(),
        passivate_after: (config.router.idle_secs > 0).then(|| config.router.idle()),
        max_user_message_bytes: usize::try_from(config.limits.max_user_message_bytes)
            .unwrap_or(usize::MAX),
        review_every_n_turns: if config.review.enabled {
            config.review.every_n_turns
        } else {
            0
        },
    }
}

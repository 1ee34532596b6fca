//! The list of every key of `config.toml`, as dotted paths.
//!
//! Environment variables can only be looked up by name, so the loader needs
//! to know every key to find `TROUPE_<SECTION>__<KEY>`. The list is checked
//! against the structs by a test (a config with every optional value set
//! serializes to exactly these keys), and against `default_config.toml` and
//! `docs/configuration.md`.

/// Every key of `config.toml`, as `section.key` (or `section.sub.key`), in the
/// order of the structs.
pub const KEYS: &[&str] = &[
    "agent.model",
    "agent.working_dir",
    "agent.max_steps_per_turn",
    "agent.tool_timeout_secs",
    "agent.spill_limit_chars",
    "agent.repeated_failure_limit",
    "agent.timezone",
    "budgets.per_turn.tokens",
    "budgets.per_turn.cost_usd",
    "budgets.per_turn.tool_calls",
    "budgets.per_turn.wall_time_secs",
    "budgets.per_bot_day.tokens",
    "budgets.per_bot_day.cost_usd",
    "budgets.per_bot_day.tool_calls",
    "budgets.per_bot_day.wall_time_secs",
    "budgets.per_delegation.tokens",
    "budgets.per_delegation.cost_usd",
    "budgets.per_delegation.tool_calls",
    "budgets.per_delegation.wall_time_secs",
    "compaction.threshold",
    "compaction.keep_recent_messages",
    "trust.mode",
    "trust.deny",
    "trust.allow",
    "sandbox.mode",
    "sandbox.network",
    "sandbox.allow_addresses",
    "delegation.max_depth",
    "delegation.max_children",
    "delegation.max_concurrent_per_bot",
    "delegation.max_concurrent_per_node",
    "delegation.child_timeout_secs",
    "messaging.max_message_chars",
    "messaging.loop_max_exchanges",
    "messaging.loop_window_secs",
    "messaging.loop_cooldown_secs",
    "routines.catch_up",
    "routines.lease_secs",
    "review.enabled",
    "review.every_n_turns",
    "providers.max_concurrent_requests",
    "providers.connect_timeout_secs",
    "providers.first_byte_timeout_secs",
    "providers.chunk_timeout_secs",
    "providers.max_retries",
    "store.synchronous",
    "log.filter",
    "log.json",
    "log.file",
    "router.idle_secs",
    "limits.max_user_message_bytes",
    "tools.command_output_cap",
    "web.allow_private_addresses",
    "web.allow_addresses",
    "web.tavily_url",
    "web.brave_url",
    "web.duckduckgo_url",
    "web.giphy_url",
    "web.klipy_url",
    "web.timeout_secs",
    "browser.chrome",
    "browser.idle_s",
    "files.max_file_bytes",
    "files.house_quota_bytes",
    "server.listen",
    "server.auth",
    "server.requests_per_second",
    "server.burst",
    "server.max_body_bytes",
    "server.request_timeout_secs",
    "server.header_timeout_secs",
    "server.max_connections",
    "server.max_connections_per_address",
    "server.allowed_hosts",
    "environments.idle_secs",
    "environments.command_timeout_secs",
    "environments.max_command_timeout_secs",
    "environments.memory_mib",
    "environments.processes",
    "environments.cpu_percent",
    "environments.cpu_secs",
    "environments.disk_mib",
    "environments.disk_files",
    "environments.network",
    "environments.landlock",
    "environments.helper",
    "environments.egress",
    "telemetry.metrics",
    "telemetry.otlp_endpoint",
    "telemetry.service_name",
    "cluster.name",
    "cluster.node_name",
    "cluster.listen",
    "cluster.join",
    "cluster.cookie_file",
    "cluster.allow_plaintext",
    "cluster.tls_cert",
    "cluster.tls_key",
    "cluster.tls_ca",
];

/// Short environment variables and the key each one sets. The long form
/// (`TROUPE_AGENT__MODEL`) wins over the short one when both are set.
pub const SHORT_ENV: &[(&str, &str)] = &[
    ("TROUPE_MODEL", "agent.model"),
    ("TROUPE_LOG", "log.filter"),
];

/// The environment variable of a key: `agent.model` → `TROUPE_AGENT__MODEL`.
pub fn env_var(key: &str) -> String {
    format!("TROUPE_{}", key.replace('.', "__").to_ascii_uppercase())
}

/// The section a bare key belongs in, if exactly one section has it.
pub(crate) fn home_of(key: &str) -> Option<&'static str> {
    let mut found = KEYS.iter().filter_map(|path| {
        let (section, last) = path.rsplit_once('.')?;
        (last == key).then_some(section)
    });
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

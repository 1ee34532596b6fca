//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests: an async
//! function made a tool by `#[tool]`, the way a Rust user writes theirs
//! (`troupe_runtime::tool::func`). `read_file`, `write_file` and
//! `run_command` mean something else in a house's conversation: each
//! meaning is a tool of its own, joined under one name by
//! `FnTool::instead_where`.

pub mod ask_user;
pub mod bot_create;
pub mod browser;
pub mod browser_exec;
pub mod conversation_search;
pub mod cronjob_manage;
pub mod delegate;
pub mod delegate_task;
pub mod delegation_search;
pub mod documents;
pub mod edit_file;
pub mod environment;
pub mod executor_accounts;
pub mod file_lock;
pub mod find_files;
pub mod host;
pub mod house;
pub mod house_files;
pub mod ledger;
pub mod memory;
pub mod message_agent;
pub mod paths;
pub mod plan;
pub mod proposals;
pub mod read_file;
pub mod run_command;
pub mod scan;
pub mod skill_manage;
pub mod skills;
pub mod table;
pub mod tool_search;
pub mod troupe_docs;
pub mod use_skill;
pub mod web;
pub mod write_file;

#[cfg(test)]
mod fuzz;
mod recall;
mod stamp;

use std::sync::Arc;

use troupe_runtime::tool::registry::Registry;

/// Every built-in tool, in the table's order (the order the model sees),
/// with commands run per the default `[sandbox]` settings.
pub fn builtin() -> Registry {
    builtin_with(troupe_runtime::sandbox::SandboxSettings::default())
}

/// Every built-in tool, with `run_command` running its commands where
/// `sandbox` (`[sandbox]` in `config.toml`) says.
pub fn builtin_with(sandbox: troupe_runtime::sandbox::SandboxSettings) -> Registry {
    builtin_configured(
        sandbox,
        &troupe_runtime::config::Tools::default(),
        &troupe_runtime::config::Web::default(),
        Arc::new(|_: &str| None),
        None,
    )
}

/// Every built-in tool, set up by `config.toml`'s `[sandbox]`, `[tools]` and
/// `[web]`, with keys (`TAVILY_API_KEY`, …) looked up through `env`;
/// `browser_exec` drives `browser` and is offered only with one.
pub fn builtin_configured(
    sandbox: troupe_runtime::sandbox::SandboxSettings,
    settings: &troupe_runtime::config::Tools,
    web: &troupe_runtime::config::Web,
    env: web::Env,
    browser: Option<Arc<browser::Browser>>,
) -> Registry {
    let commands = run_command::CommandHost::with_sandbox(sandbox.clone())
        .output_cap(settings.command_output_cap);
    let command_network = commands.network();
    let tools: Vec<Arc<dyn troupe_runtime::tool::Tool>> = vec![
        Arc::new(
            read_file::read_file::tool()
                .instead_where(host::in_house, house_files::read_file::read_file::tool()),
        ),
        Arc::new(
            write_file::write_file::tool()
                .instead_where(host::in_house, house_files::write_file::write_file::tool()),
        ),
        Arc::new(edit_file::edit_file::tool()),
        Arc::new(find_files::find_files::tool()),
        Arc::new(
            run_command::run_command::tool(commands)
                .instead_where(host::in_house, run_command::house::run_command::tool()),
        ),
        Arc::new(web::search::web_search::tool(web::search::Engines::new(
            web,
            Arc::clone(&env),
        ))),
        Arc::new(web::fetch::web_fetch::tool(web::fetch::WebReader::new(web))),
        Arc::new(browser_exec::tool(browser_exec::BrowserExecHost {
            sandbox: sandbox.clone(),
            policy: web::guard::Policy::from_settings(web),
            network: Some(command_network),
            browser,
        })),
        Arc::new(web::gif::send_gif::tool(web::gif::GifSearch::new(
            web,
            Arc::clone(&env),
        ))),
        Arc::new(memory::memory::tool()),
        Arc::new(ask_user::ask_user::tool()),
        Arc::new(delegate::delegate::tool()),
        Arc::new(skill_manage::skill_manage::tool()),
        Arc::new(use_skill::use_skill::tool()),
        Arc::new(conversation_search::conversation_search::tool()),
        Arc::new(delegation_search::delegation_search::tool()),
        Arc::new(executor_accounts::executor_accounts::tool()),
        Arc::new(plan::plan::tool()),
        Arc::new(cronjob_manage::cronjob_manage::tool()),
        Arc::new(message_agent::message_agent::tool()),
        Arc::new(bot_create::bot_create::tool()),
    ];
    let tools = tools
        .into_iter()
        .chain(house::all())
        .chain(environment::all())
        .chain([
            Arc::new(house_files::search_files::search_files::tool())
                as Arc<dyn troupe_runtime::tool::Tool>,
            Arc::new(house_files::list_files::list_files::tool()),
            Arc::new(house_files::delete_file::delete_file::tool()),
            Arc::new(troupe_docs::troupe_docs::tool()),
            Arc::new(tool_search::tool_search::tool()),
        ]);
    let mut registry = Registry::new();
    for tool in tools {
        // Built-in names are unique and valid; a clash is a bug caught by the tests.
        if let Err(e) = registry.register(tool) {
            tracing::error!(error = %e, "built-in tool not registered");
        }
    }
    registry
}

#[cfg(test)]
#[path = "aliases_tests.rs"]
mod aliases_tests;

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_tool_registers_and_has_a_row_in_the_table() {
        let registry = super::builtin();
        assert_eq!(registry.len(), 42, "{registry:?}");
        for tool in registry.iter() {
            let name = &tool.spec().name;
            assert!(
                super::table::row_of(name).is_some(),
                "`{name}` has no row in the table"
            );
        }
    }
}

//! troupe-tools: the agents' tools, one file per tool.
//!
//! Each file holds a tool's params type (its JSON schema is derived from it),
//! its description, its flags and its handler, with its tests.

pub mod ask_user;
pub mod bot_create;
pub mod conversation_search;
pub mod cronjob_manage;
pub mod delegate;
pub mod delegate_task;
pub mod delegation_search;
pub mod documents;
pub mod edit_file;
pub mod environment;
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
    )
}

/// Every built-in tool, set up by `config.toml`'s `[sandbox]`, `[tools]` and
/// `[web]`, with keys (`TAVILY_API_KEY`, …) looked up through `env`.
pub fn builtin_configured(
    sandbox: troupe_runtime::sandbox::SandboxSettings,
    settings: &troupe_runtime::config::Tools,
    web: &troupe_runtime::config::Web,
    env: web::Env,
) -> Registry {
    let tools: Vec<Arc<dyn troupe_runtime::tool::Tool>> = vec![
        Arc::new(read_file::ReadFile::new()),
        Arc::new(write_file::WriteFile::new()),
        Arc::new(edit_file::EditFile::new()),
        Arc::new(find_files::FindFiles::new()),
        Arc::new(
            run_command::RunCommand::with_sandbox(sandbox).output_cap(settings.command_output_cap),
        ),
        Arc::new(web::search::WebSearch::new(web, Arc::clone(&env))),
        Arc::new(web::fetch::WebFetch::new(web)),
        Arc::new(web::gif::SendGif::new(web, Arc::clone(&env))),
        Arc::new(memory::MemoryTool::new()),
        Arc::new(ask_user::AskUser::new()),
        Arc::new(delegate::Delegate::new()),
        Arc::new(skill_manage::SkillManageTool::new()),
        Arc::new(use_skill::UseSkillTool::new()),
        Arc::new(conversation_search::ConversationSearch::new()),
        Arc::new(delegation_search::DelegationSearch::new()),
        Arc::new(plan::PlanTool::new()),
        Arc::new(cronjob_manage::CronjobManage::new()),
        Arc::new(message_agent::MessageAgent::new()),
        Arc::new(bot_create::BotCreate::new()),
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
            Arc::new(troupe_docs::TroupeDocs::new()),
            Arc::new(tool_search::ToolSearch::new()),
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
        assert_eq!(registry.len(), 40, "{registry:?}");
        for tool in registry.iter() {
            let name = &tool.spec().name;
            assert!(
                super::table::row_of(name).is_some(),
                "`{name}` has no row in the table"
            );
        }
    }
}

//! Opening a conversation's state: its history loaded, the calls a crash
//! left without results repaired, its system prompt frozen, its carried
//! tools rebuilt.

use std::sync::Arc;

use ractor::ActorProcessingErr;
use tokio_util::sync::CancellationToken;
use troupe_runtime::protocol::Message;

use super::history;
use super::journal::Journal;
use super::prompt;
use super::turn::dispatcher;
use super::{ConversationArgs, State};
use crate::guard::Guard;

/// Builds the state: loads the history, repairs calls a crash left without
/// results, freezes the system prompt.
pub(super) async fn open(args: ConversationArgs) -> Result<State, ActorProcessingErr> {
    let node = Arc::clone(&args.node);
    let durable = node.settings.durable;
    // This incarnation takes over: the last one's running turn is
    // cancelled and its writes refused; those already queued land before
    // the history is read.
    let (fence, cut) = args.carry.take_over().await;
    let journal =
        Journal::new(durable.then(|| node.store.clone()), args.id, args.bot.id).fenced(fence);
    let mut history = if args.fresh {
        Vec::new()
    } else {
        if cut {
            journal.settle().await?;
        }
        journal.load().await?
    };
    // The arguments' services are this incarnation's own fork already
    // (`Node::conversation_args`): shared, not forked again.
    let services = args.services.clone();
    // `read_file` attaches images only for a model that takes them.
    services.set_model_traits(troupe_tools::read_file::ModelTraits {
        sees_images: args.model.sees_images,
    });
    // `use_skill` loads the library skills the bot's definition lists.
    services.set_library_skills(troupe_tools::use_skill::LibrarySkills(
        args.bot.spec.skills.clone(),
    ));
    let mut state = State {
        system: "".into(),
        journal,
        history: Default::default(),
        history_size: Default::default(),
        services,
        tools: Default::default(),
        tools_generation: 0,
        guard: Guard::new(node.settings.max_steps, node.settings.repeat_limit),
        turns: 0,
        active: None,
        passivated: false,
        resuming: None,
        waiting: Vec::new(),
        idle_since: std::time::Instant::now(),
        idle_timer: false,
        args,
    };
    let mut parts = node.prompt_parts(&state.args.bot.spec);
    if let Some(scope) = state.args.services.house_scope() {
        // Outside the home's own house, a conversation is told nothing of
        // the home's other bots nor of its owner.
        if !scope.home {
            parts.roster.clear();
            parts.user_profile.clear();
            // The agents the rosters offer (the registered kinds) are
            // every house's (`kinds::houses`).
            parts.roster.extend(node.roster_entries());
        }
    }
    let mut system = prompt::system_prompt(&parts);
    if !state.args.briefing.is_empty() {
        system.push_str("\n\n");
        system.push_str(&state.args.briefing);
    }
    state.system = node
        .prompts
        .intern(crate::intern::key_of(system.as_str()), system);
    // Carried tools rebuild what they held from their latest results.
    let ctx = state.tool_context(CancellationToken::new());
    for (i, m) in history.iter().enumerate() {
        if let Message::Tool {
            call_id,
            name,
            result,
        } = m
        {
            if let Some(tool) = node.tools.get(name).filter(|t| t.spec().flags.carried) {
                let args = history[..i]
                    .iter()
                    .rev()
                    .find_map(|m| match m {
                        Message::Assistant { tool_calls, .. } => {
                            tool_calls.iter().find(|c| c.id == *call_id)
                        }
                        _ => None,
                    })
                    .map(|c| c.arguments.clone())
                    .unwrap_or_default();
                tool.restore(&ctx, &args, result);
            }
        }
    }
    let unanswered = history::unanswered_calls(&history);
    if !unanswered.is_empty() {
        state.replace_history(history.clone());
        state.refresh_tools();
        let dispatcher = dispatcher(&state);
        // A call waiting on a kept approval or question never ran: the
        // resumed turn asks it again, under the same request id.
        let kept = node.questions.kept_calls(state.args.id).await?;
        let mut repaired = Vec::new();
        for call in &unanswered {
            if kept.contains(&call.id) {
                state.waiting.push(call.clone());
                continue;
            }
            let result = if dispatcher.is_read_only(&call.name) {
                dispatcher.run_one(call, &state.tools.names, &ctx).await
            } else {
                history::outcome_unknown(call)
            };
            repaired.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                result,
            });
        }
        if !repaired.is_empty() {
            state.journal.append(&repaired).await?;
            history.extend(repaired);
        }
    }
    state.replace_history(history);
    Ok(state)
}

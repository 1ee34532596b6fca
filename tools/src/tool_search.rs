//! `tool_search`: finds deferred tools and loads them into the conversation.
//!
//! It ranks the conversation's deferred tools with BM25 over their name,
//! source, description and parameter names, an exact name first, and loads up
//! to `limit` of them. Its result's `data.loaded` is what makes them real
//! tools from the next model call on (see `troupe_runtime::tool::catalog`).
//! Its description lists the deferred tools by source, within 5% of the
//! context window and at most 4,000 tokens.

use std::collections::HashMap;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::catalog::DeferredCatalog;
use troupe_runtime::tool::{Exposure, ToolContext, ToolSpec};

/// Arguments of `tool_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Keywords (`schedule a routine`) or a tool's exact name.
    pub query: String,
    /// How many tools to load, 1 to 10 (default 5).
    pub limit: Option<u32>,
}

/// Offered when the conversation has deferred tools, its description listing them by source
/// within 5% of the context window (at most 4,000 tokens).
fn offered_with_listing(ctx: &ToolContext, spec: &ToolSpec) -> Option<ToolSpec> {
    let catalog = ctx.services.deferred_catalog()?;
    if catalog.specs.is_empty() && catalog.pending.is_empty() {
        return None;
    }
    let budget_chars = ((ctx.context_window / 20).min(4_000) * 4) as usize;
    let mut last = LAST_OFFERED.lock();
    if let Some(held) = last.as_ref().filter(|held| {
        held.budget_chars == budget_chars
            && std::ptr::eq(held.catalog.as_ptr(), Arc::as_ptr(&catalog))
            && held.base == spec.description
    }) {
        return Some(held.spec.clone());
    }
    let mut offered = spec.clone();
    offered.description = format!("{}\n{}", spec.description, listing(&catalog, budget_chars));
    *last = Some(Offered {
        catalog: Arc::downgrade(&catalog),
        budget_chars,
        base: spec.description.clone(),
        spec: offered.clone(),
    });
    Some(offered)
}

/// The spec last offered, with what it was made of: conversations of one
/// bot share one deferred catalog (see `troupe_actors::toolset`), so a
/// thousand new ones list it once, not a thousand times.
struct Offered {
    /// The catalog listed. Held weakly: the weak reference keeps its
    /// allocation, so a catalog at the same address is the same one (and a
    /// catalog is never changed once made).
    catalog: std::sync::Weak<DeferredCatalog>,
    budget_chars: usize,
    /// The tool's own description, before the listing.
    base: String,
    spec: ToolSpec,
}

static LAST_OFFERED: parking_lot::Mutex<Option<Offered>> = parking_lot::Mutex::new(None);

/// Find deferred tools by keywords or exact name and load them, so you can call them from your
/// next step with their own schema. Loads up to `limit` (1-10, default 5).
#[tool(read_only, offered_as = offered_with_listing)]
pub async fn tool_search(params: Params, ctx: &ToolContext) -> ToolResult {
    let limit = params.limit.unwrap_or(5);
    if !(1..=10).contains(&limit) {
        return ToolResult::error(format!("`limit` must be between 1 and 10, not {limit}."));
    }
    let Some(catalog) = ctx.services.deferred_catalog() else {
        return ToolResult::error("there are no deferred tools to load in this conversation.");
    };
    let (catalog, notes) = with_started_sources(&catalog, ctx).await;
    let ranked = rank(&catalog.specs, &params.query);
    if ranked.is_empty() {
        let names: Vec<&str> = catalog.specs.iter().map(|s| s.name.as_str()).collect();
        return ToolResult::error(format!(
            "no deferred tool matches `{}`. The deferred tools are: {}.{}",
            params.query,
            names.join(", "),
            notes
        ));
    }
    let chosen: Vec<&ToolSpec> = ranked
        .into_iter()
        .take(limit as usize)
        .map(|i| &catalog.specs[i])
        .collect();
    let mut text = format!(
        "Loaded {} tool(s); call them directly from now on:\n",
        chosen.len()
    );
    for spec in &chosen {
        text.push_str(&format!(
            "- {} ({}): {}\n",
            spec.name,
            spec.source,
            first_line(&spec.description)
        ));
    }
    let loaded: Vec<&str> = chosen.iter().map(|s| s.name.as_str()).collect();
    let text = format!("{}{notes}", text.trim_end());
    ToolResult::ok_with(text, serde_json::json!({ "loaded": loaded }))
}

/// The catalog with the tools of the sources it names as pending, started
/// now (MCP servers connect on first use), and a note for those that failed.
async fn with_started_sources(
    catalog: &DeferredCatalog,
    ctx: &ToolContext,
) -> (DeferredCatalog, String) {
    let mut out = catalog.clone();
    let Some(lazy) = ctx.services.lazy_sources() else {
        return (out, String::new());
    };
    let still: Vec<String> = lazy
        .0
        .pending()
        .into_iter()
        .filter(|s| catalog.pending.contains(s))
        .collect();
    if still.is_empty() {
        return (out, String::new());
    }
    let (specs, failures) = lazy.0.start(&still).await;
    for spec in specs {
        let allowed = crate::table::allowed_by_lists(&spec.name, &catalog.allow, &catalog.deny);
        if allowed
            && spec.exposure == Exposure::Deferred
            && !out.specs.iter().any(|s| s.name == spec.name)
        {
            out.specs.push(spec);
        }
    }
    out.pending.clear();
    let notes = failures
        .iter()
        .map(|f| format!("\nNot available: {f}"))
        .collect::<String>();
    (out, notes)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The deferred tools by source, cut to `budget_chars`.
fn listing(catalog: &DeferredCatalog, budget_chars: usize) -> String {
    let mut by_source: Vec<(&str, Vec<&str>)> = Vec::new();
    for spec in &catalog.specs {
        match by_source.iter_mut().find(|(s, _)| *s == spec.source) {
            Some((_, names)) => names.push(&spec.name),
            None => by_source.push((&spec.source, vec![&spec.name])),
        }
    }
    let mut out = String::from("Deferred tools:");
    for source in &catalog.pending {
        by_source.push((
            source,
            vec!["(not started yet: a search starts it and finds its tools)"],
        ));
    }
    for (source, names) in by_source {
        let line = format!("\n- {source}: {}", names.join(", "));
        if out.len() + line.len() > budget_chars {
            out.push_str("\n- … (more: search by keyword)");
            break;
        }
        out.push_str(&line);
    }
    out
}

fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn document(spec: &ToolSpec) -> Vec<String> {
    let mut words = tokens(&spec.name);
    words.extend(tokens(&spec.source));
    words.extend(tokens(&spec.description));
    if let Some(props) = spec
        .parameters
        .get("properties")
        .and_then(|p| p.as_object())
    {
        for key in props.keys() {
            words.extend(tokens(key));
        }
    }
    words
}

/// Indices of `specs` matching `query`, best first: an exact name, then BM25.
pub fn rank(specs: &[ToolSpec], query: &str) -> Vec<usize> {
    let query = query.trim();
    if let Some(i) = specs.iter().position(|s| s.name == query) {
        return vec![i];
    }
    let docs: Vec<Vec<String>> = specs.iter().map(document).collect();
    let n = docs.len() as f64;
    let avg_len = docs.iter().map(Vec::len).sum::<usize>() as f64 / n.max(1.0);
    let terms = tokens(query);
    let (k1, b) = (1.2, 0.75);
    let mut scores: Vec<(usize, f64)> = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let mut tf: HashMap<&str, f64> = HashMap::new();
        for w in doc {
            *tf.entry(w.as_str()).or_default() += 1.0;
        }
        let mut score = 0.0;
        for term in &terms {
            let df = docs.iter().filter(|d| d.iter().any(|w| w == term)).count() as f64;
            let Some(&f) = tf.get(term.as_str()) else {
                continue;
            };
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            score += idf * f * (k1 + 1.0)
                / (f + k1 * (1.0 - b + b * doc.len() as f64 / avg_len.max(1.0)));
        }
        // A query word inside the tool's name counts extra.
        if terms
            .iter()
            .any(|t| specs[i].name.to_lowercase().contains(t.as_str()))
        {
            score += 1.0;
        }
        if score > 0.0 {
            scores.push((i, score));
        }
    }
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scores.into_iter().map(|(i, _)| i).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use troupe_runtime::home::Home;
    use troupe_runtime::tool::catalog::loaded_tools;
    use troupe_runtime::tool::Tool as _;

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec::new(
            name,
            description,
            serde_json::json!({"type": "object", "properties": {"job_id": {}}}),
        )
        .deferred()
    }

    fn ctx_with(specs: Vec<ToolSpec>) -> (ToolContext, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::standalone(Home::new(dir.path()), dir.path().into());
        ctx.services.set_deferred_catalog(Arc::new(DeferredCatalog {
            specs,
            ..Default::default()
        }));
        (ctx, dir)
    }

    fn catalog() -> Vec<ToolSpec> {
        vec![
            spec(
                "cronjob_manage",
                "Create and manage routines: prompts run on a schedule.",
            ),
            spec("plan", "The task list of multi-step work."),
            spec("conversation_search", "Find and read past conversations."),
            spec(
                "delegation_search",
                "Recall what delegations did; search their record.",
            ),
        ]
    }

    #[test]
    fn an_exact_name_comes_first_and_alone() {
        assert_eq!(rank(&catalog(), "plan"), vec![1]);
    }

    #[test]
    fn keywords_rank_by_bm25() {
        let ranked = rank(&catalog(), "search past conversations");
        assert_eq!(ranked[0], 2);
        assert!(ranked.contains(&3));
        assert_eq!(rank(&catalog(), "schedule routine"), vec![0]);
        assert!(rank(&catalog(), "zebra").is_empty());
    }

    #[tokio::test]
    async fn a_search_loads_tools_through_its_result() {
        let (ctx, _dir) = ctx_with(catalog());
        let result = tool_search::tool()
            .call(serde_json::json!({"query": "search", "limit": 2}), &ctx)
            .await;
        assert!(!result.is_error(), "{}", result.text);
        let history = vec![troupe_runtime::protocol::Message::Tool {
            call_id: "c".into(),
            name: troupe_runtime::tool::catalog::TOOL_SEARCH.into(),
            result,
        }];
        assert_eq!(
            loaded_tools(&history).into_iter().collect::<Vec<_>>(),
            vec![
                "conversation_search".to_string(),
                "delegation_search".to_string()
            ]
        );
    }

    #[tokio::test]
    async fn limits_and_misses_are_errors() {
        let (ctx, _dir) = ctx_with(catalog());
        let tool = tool_search::tool();
        let r = tool
            .call(serde_json::json!({"query": "plan", "limit": 11}), &ctx)
            .await;
        assert_eq!(r.text, "`limit` must be between 1 and 10, not 11.");
        let r = tool.call(serde_json::json!({"query": "zebra"}), &ctx).await;
        assert!(r.is_error());
        assert!(
            r.text
                .contains("The deferred tools are: cronjob_manage, plan"),
            "{}",
            r.text
        );
    }

    #[test]
    fn the_description_lists_deferred_tools_by_source() {
        let (ctx, _dir) = ctx_with(catalog());
        let spec = tool_search::tool().available(&ctx).unwrap();
        assert!(spec.description.ends_with(
            "Deferred tools:\n- builtin: cronjob_manage, plan, conversation_search, delegation_search"
        ));
        let (empty, _d) = ctx_with(Vec::new());
        assert!(tool_search::tool().available(&empty).is_none());
    }

    #[test]
    fn a_listing_kept_for_one_catalog_is_never_offered_with_another() {
        let tool = tool_search::tool();
        let (first, _d1) = ctx_with(catalog());
        let (other, _d2) = ctx_with(vec![spec("plan", "The task list.")]);
        let listed = |ctx: &ToolContext| tool.available(ctx).unwrap().description;
        let ends = |d: String, with: &str| assert!(d.ends_with(with), "{d}");
        let all = "- builtin: cronjob_manage, plan, conversation_search, delegation_search";
        // Asked again and in turns: each catalog its own listing.
        ends(listed(&first), all);
        ends(listed(&first), all);
        ends(listed(&other), "Deferred tools:\n- builtin: plan");
        ends(listed(&first), all);
        // A catalog made anew (the old one dropped) is listed anew.
        first
            .services
            .set_deferred_catalog(Arc::new(DeferredCatalog {
                specs: vec![spec("cronjob_manage", "Routines.")],
                ..Default::default()
            }));
        ends(listed(&first), "Deferred tools:\n- builtin: cronjob_manage");
    }
}

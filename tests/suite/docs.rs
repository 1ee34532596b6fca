//! The docs that must not drift from the code: `docs/tools.md` is rendered
//! from the tool registry and the offer table, and the scripts shown in
//! `docs/getting-started.md` must load as scripts.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::Value;
use troupe::runtime::model::ScriptedProvider;
use troupe::runtime::protocol::ActorKind;
use troupe::runtime::tool::{Exposure, GateSubject, ToolSpec};
use troupe::tools::table::{self, Offer};

fn repo_file(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// One line of Markdown table cell text.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

fn kind_title(kind: ActorKind) -> &'static str {
    match kind {
        ActorKind::Conversation => "conversation",
        ActorKind::Bot => "bot",
        ActorKind::RoutineRun => "routine run",
        ActorKind::Subagent => "subagent",
    }
}

fn offer_text(offer: Offer) -> &'static str {
    match offer {
        Offer::Yes => "yes",
        Offer::No => "no",
        Offer::WithBots => "with bots",
        Offer::WithBrowser => "with a browser",
    }
}

fn exposure_text(exposure: Exposure) -> &'static str {
    match exposure {
        Exposure::AlwaysOn => "always-on",
        Exposure::Deferred => "deferred",
    }
}

fn flags_text(spec: &ToolSpec) -> String {
    let f = &spec.flags;
    let flags: Vec<&str> = [
        (f.read_only, "read-only"),
        (f.failure_tolerant, "failure-tolerant"),
        (f.carried, "carried"),
        (f.pages_own_output, "pages-own-output"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name)
    .collect();
    if flags.is_empty() {
        "none".into()
    } else {
        flags.join(", ")
    }
}

/// The values of an enum schema (`enum`, or `oneOf` of `const`s), with their
/// descriptions.
fn enum_values(schema: &Value) -> Option<Vec<(String, Option<String>)>> {
    if let Some(values) = schema["enum"].as_array() {
        return Some(values.iter().map(|v| (v.to_string(), None)).collect());
    }
    let variants = schema["oneOf"].as_array()?;
    variants
        .iter()
        .map(|v| {
            let value = v.get("const")?;
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            Some((text, v["description"].as_str().map(str::to_string)))
        })
        .collect()
}

/// A schema without its `null` alternative (an `Option` field).
fn non_null(schema: &Value) -> &Value {
    if let Some(any) = schema["anyOf"].as_array() {
        let rest: Vec<&Value> = any.iter().filter(|s| s["type"] != "null").collect();
        if let [one] = rest.as_slice() {
            return one;
        }
    }
    schema
}

fn type_text(schema: &Value) -> String {
    let schema = non_null(schema);
    if let Some(values) = enum_values(schema) {
        let names: Vec<String> = values.iter().map(|(v, _)| format!("`{v}`")).collect();
        return format!("one of {}", names.join(", "));
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let types: Vec<&str> = types.into_iter().filter(|t| *t != "null").collect();
    match types.as_slice() {
        ["array"] => {
            let items = &schema["items"];
            if items["type"] == "object" {
                "array of objects".into()
            } else {
                format!("array of {}", type_text(items))
            }
        }
        [] => "any".into(),
        several => several.join(" or "),
    }
}

/// The parameter rows of an object schema; the fields of an array of
/// objects follow as `name[].field`.
fn parameter_rows(schema: &Value, prefix: &str, out: &mut Vec<[String; 4]>) {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    for (name, property) in properties {
        let full = format!("{prefix}{name}");
        let mut description = property["description"].as_str().unwrap_or("").to_string();
        if let Some(values) = enum_values(non_null(property)) {
            let explained: Vec<String> = values
                .iter()
                .filter_map(|(v, d)| d.as_ref().map(|d| format!("`{v}`: {d}")))
                .collect();
            if !explained.is_empty() {
                description = format!("{description} Values: {}", explained.join("; "));
            }
        }
        out.push([
            format!("`{full}`"),
            type_text(property),
            if required.contains(&name.as_str()) {
                "yes"
            } else {
                "no"
            }
            .into(),
            cell(&description),
        ]);
        let inner = non_null(property);
        if inner["items"]["type"] == "object" {
            parameter_rows(&inner["items"], &format!("{full}[]."), out);
        } else if inner["type"] == "object" {
            parameter_rows(inner, &format!("{full}."), out);
        }
    }
}

/// The whole reference, from the registry and the table.
fn render_tools_reference() -> String {
    let registry = troupe::tools::builtin();
    let mut md = String::new();
    md.push_str(
        "# Tools\n\n\
         <!-- Generated from the tool registry by tests/suite/docs.rs (test `tools_reference`).\n     \
         Do not edit by hand: run `UPDATE_DOCS=1 cargo nextest run -E 'test(tools_reference)'`. -->\n\n\
         The built-in tools, in the order the model sees them. `troupe tools` prints the same\n\
         summary from the binary you run.\n\n\
         - **always-on** tools are in every model call; **deferred** ones are listed by name in\n  \
         `tool_search`'s description and loaded with it, so they cost no prompt until used.\n\
         - Flags: a step's calls run in the order the model made them, so each call's result\n  \
         reflects every call before it; only adjacent **read-only** calls run at once, never before\n  \
         an earlier writing call; results keep the calls' order (and\n  \
         read-only calls run again after a crash); **failure-tolerant** tools may fail repeatedly without the guard halting\n  \
         the turn; **carried** tools' state comes back after a compaction; **pages-own-output**\n  \
         results are never spilled to a file.\n\
         - Offered to: which kinds of actor are offered the tool before a bot's own `tools` /\n  \
         `deny_tools` lists narrow it (`tools/src/table.rs`). *conversation* is the main agent\n  \
         talking with you, *bot* a bot's conversation, *routine run* one run of a routine,\n  \
         *subagent* a task of a delegation. *with bots*: only once the home has a bot. A tool of\n  \
         your own (`RuntimeBuilder::tool`) is offered to every kind.\n\
         - **In a house thread** the house tools are offered, and `read_file` and `write_file` mean\n  \
         the house's shared files ([their house form](#read_file-and-write_file-in-a-house));\n  \
         `edit_file`, `find_files` and `cronjob_manage` (outside the house `home`) are not offered\n  \
         there, nor in what a house's conversation starts (its subagents, the conversation a\n  \
         `message_agent` opens), which works for the same house. Outside a house `read_file` and\n  \
         `write_file` are the local-file tools below. The names never change.\n\
         - **Which `run_command` ran where.** In a house thread, `run_command` takes the house's\n  \
         parameters (`cmd`, `cwd`, `timeout`: [its house form](#run_command-in-a-house)) and runs in the\n  \
         thread's *environment*: a sandbox with its own workdir `/workspace`, no network and kernel\n  \
         limits ([security.md](security.md#house-environments-are-sandboxes-that-fail-closed)),\n  \
         never on the machine; troupe's own models are reached from there only through the\n  \
         environment's model relay (`$OPENAI_BASE_URL`, `$ANTHROPIC_BASE_URL`; the key stays\n  \
         outside). With no environment it runs nothing and says to call\n  \
         `create_environment`; in what a house's conversation starts it refuses. Everywhere\n  \
         else (the personal agent, routines, subagents) it is the\n  \
         *local* `run_command`: on this machine, in the working folder, inside the local sandbox\n  \
         where `[sandbox]` has one. Each result says which: an environment's has `where:\n  \
         environment` and the environment's id in its data and ends with `ran in environment …`;\n  \
         a local one has `sandbox: bubblewrap` or `unsandboxed`. The gate's approval question says\n  \
         where too.\n\n",
    );
    md.push_str("| tool | exposure | flags |");
    for kind in ActorKind::ALL {
        let _ = write!(md, " {} |", kind_title(kind));
    }
    md.push_str("\n|---|---|---|");
    md.push_str(&"---|".repeat(ActorKind::ALL.len()));
    md.push('\n');
    for tool in registry.iter() {
        let spec = tool.spec();
        let _ = write!(
            md,
            "| [`{0}`](#{0}) | {1} | {2} |",
            spec.name,
            exposure_text(spec.exposure),
            flags_text(spec)
        );
        for kind in ActorKind::ALL {
            let _ = write!(md, " {} |", offer_text(table::offer(&spec.name, kind)));
        }
        md.push('\n');
    }
    for tool in registry.iter() {
        let spec = tool.spec();
        let _ = write!(md, "\n## {}\n\n{}\n\n", spec.name, spec.description.trim());
        let _ = writeln!(md, "- Exposure: {}", exposure_text(spec.exposure));
        let _ = writeln!(md, "- Flags: {}", flags_text(spec));
        let offers: Vec<String> = ActorKind::ALL
            .iter()
            .map(|k| {
                format!(
                    "{} {}",
                    kind_title(*k),
                    offer_text(table::offer(&spec.name, *k))
                )
            })
            .collect();
        let _ = writeln!(md, "- Offered to: {}", offers.join(", "));
        if let Some(secs) = spec.timeout_secs {
            let _ = writeln!(md, "- Timeout: {secs} s");
        }
        match &spec.gate {
            GateSubject::Call => {}
            GateSubject::Command(arg) => {
                let _ = writeln!(md, "- Trust gate: judges the shell command in `{arg}`");
            }
            GateSubject::WritePath(arg) => {
                let _ = writeln!(md, "- Trust gate: judges the path written, in `{arg}`");
            }
            GateSubject::Untrusted(source) => {
                let _ = writeln!(
                    md,
                    "- Trust gate: asks before every call ({source} is untrusted)"
                );
            }
        }
        let mut rows = Vec::new();
        parameter_rows(&spec.parameters, "", &mut rows);
        if rows.is_empty() {
            md.push_str("\nNo parameters.\n");
            continue;
        }
        md.push_str("\n| parameter | type | required | description |\n|---|---|---|---|\n");
        for [name, ty, required, description] in rows {
            let _ = writeln!(md, "| {name} | {ty} | {required} | {description} |");
        }
    }
    md.push_str(MCP_TOOLS);
    md.push_str(
        "\n## send_gif's post\n\n\
         In a house thread the GIF is a message of the bot in its thread, carrying an image\n\
         attachment (`kind: image`, `url`, `preview`, `width`, `height`, `bytes`, `title`, the\n\
         service's `attribution` and `page`): the page shows it with its attribution, `troupe thread\n\
         read` prints it as a link, and the other bots read `[image: title <url>, attribution]` in\n\
         their transcripts. In a personal chat the result's data carries the same `post` and the\n\
         chat prints its link. Without `GIPHY_API_KEY` or `KLIPY_API_KEY` it is still offered and\n\
         answers with an error saying how to set one up.\n",
    );
    md.push_str("\n## run_command in a house\n");
    let spec = troupe_tools::run_command::house::run_command::tool()
        .spec()
        .clone();
    let _ = write!(md, "\n{}\n\n", spec.description.trim());
    if let GateSubject::Command(arg) = &spec.gate {
        let _ = writeln!(md, "- Trust gate: judges the shell command in `{arg}`\n");
    }
    let mut rows = Vec::new();
    parameter_rows(&spec.parameters, "", &mut rows);
    md.push_str("| parameter | type | required | description |\n|---|---|---|---|\n");
    for [name, ty, required, description] in rows {
        let _ = writeln!(md, "| {name} | {ty} | {required} | {description} |");
    }
    md.push_str("\n## read_file and write_file in a house\n");
    for spec in [
        troupe_tools::house_files::read_file::read_file::tool()
            .spec()
            .clone(),
        troupe_tools::house_files::write_file::write_file::tool()
            .spec()
            .clone(),
    ] {
        let _ = write!(md, "\n### {}\n\n{}\n\n", spec.name, spec.description.trim());
        let mut rows = Vec::new();
        parameter_rows(&spec.parameters, "", &mut rows);
        md.push_str("| parameter | type | required | description |\n|---|---|---|---|\n");
        for [name, ty, required, description] in rows {
            let _ = writeln!(md, "| {name} | {ty} | {required} | {description} |");
        }
    }
    md
}

/// The reference's last section: the tools of the user's MCP servers.
const MCP_TOOLS: &str = "\n## MCP tools\n\n\
The tools of the servers in the home's `mcp.json` (see `docs/configuration.md`) follow the\n\
built-in ones, server by server in the file's order, each server's tools in the order it\n\
lists them. Each is named `mcp__<server>__<tool>` and is deferred (found and loaded with\n\
`tool_search`, which connects a server the first time it looks into it) unless the server\n\
is `alwaysLoad`. A tool's `readOnlyHint` makes it read-only and `destructiveHint` is shown\n\
by `troupe mcp list`. Every call passes the trust gate: on a server marked\n\
`\"trust\": \"untrusted\"`, a tool that is not read-only is asked about before every call,\n\
whatever the trust mode. Results (text, images, embedded resources, structured content)\n\
reach the model inside an `<untrusted_tool_result source=\"mcp:<server>\" tool=\"…\">`\n\
block, as data rather than instructions; images and structured content are also kept in\n\
the result's data. An oversized result is spilled to a file like any other. A bot's\n\
`tools` and `deny_tools` lists apply (`mcp__tracker__*` matches a server's tools), and a bot\n\
gets only the servers it is given (the main agent gets them all).\n";

#[test]
fn tools_reference() {
    let path = repo_file("docs/tools.md");
    let rendered = render_tools_reference();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    if current != rendered {
        let diff = similar_lines(&current, &rendered);
        panic!(
            "docs/tools.md is out of date with the tool registry; regenerate it with\n\
             UPDATE_DOCS=1 cargo nextest run -E 'test(tools_reference)'\nfirst differences:\n{diff}"
        );
    }
}

/// The first few lines that differ, for the failure message.
fn similar_lines(old: &str, new: &str) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..old.len().max(new.len()) {
        let (a, b) = (old.get(i), new.get(i));
        if a != b && shown < 5 {
            let _ = writeln!(out, "line {}:\n  file: {:?}\n  code: {:?}", i + 1, a, b);
            shown += 1;
        }
    }
    out
}

#[test]
fn the_reference_covers_every_tool_and_its_parameters() {
    let md = render_tools_reference();
    for tool in troupe::tools::builtin().iter() {
        let spec = tool.spec();
        assert!(
            md.contains(&format!("\n## {}\n", spec.name)),
            "{}",
            spec.name
        );
        if let Some(props) = spec.parameters["properties"].as_object() {
            for name in props.keys() {
                assert!(
                    md.contains(&format!("| `{name}` |")),
                    "{}.{name}",
                    spec.name
                );
            }
        }
    }
    assert!(
        md.contains("| `tasks[].goal` | string | yes |"),
        "nested fields are listed"
    );
    assert!(md.contains("| `action` | one of `create`, `list`, `update`, `pause`, `resume`, `remove`, `run` | yes |"));
}

/// The ```json blocks of getting-started.md that hold `{"turns": ...}` load as scripts.
#[test]
fn getting_started_scripts_load() {
    let text = std::fs::read_to_string(repo_file("docs/getting-started.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut found = 0;
    for (n, block) in text.split("```json\n").skip(1).enumerate() {
        let body = block.split("\n```").next().unwrap();
        if !body.contains("\"turns\"") {
            continue;
        }
        let path = dir.path().join(format!("block{n}.json"));
        std::fs::write(&path, body).unwrap();
        ScriptedProvider::load(&path).unwrap_or_else(|e| panic!("json block {n}: {e}"));
        found += 1;
    }
    assert!(found > 0, "getting-started.md shows no script");
}

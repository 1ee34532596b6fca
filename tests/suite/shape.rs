//! The code keeps the shape issue 32 gave it, read from the sources: no
//! production file over 700 lines, one way to write a tool (the `#[tool]`
//! function, `troupe_runtime::tool::FnTool`), a node that holds its
//! features' handles typed and lends its tools typed services, and a
//! library that compiles the binary's modules only behind their features. A change that breaks one fails
//! here with what to do instead.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The crates' production sources: every `.rs` under their `src`, less
/// test files (`*_tests.rs`, `tests.rs`) and the fuzz drivers' corpora.
fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let name = path.file_name().unwrap_or_default().to_string_lossy();
                if !name.ends_with("_tests.rs") && name != "tests.rs" {
                    out.push(path);
                }
            }
        }
    }
    let mut out = Vec::new();
    for dir in [
        "src",
        "runtime/src",
        "tools/src",
        "actors/src",
        "macros/src",
        "fuzzing/src",
    ] {
        walk(&root().join(dir), &mut out);
    }
    out.sort();
    out
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn no_production_file_is_over_seven_hundred_lines() {
    let long: Vec<String> = sources()
        .iter()
        .filter_map(|path| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            (lines > 700).then(|| format!("{} ({lines} lines)", relative(path)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over 700 lines: {long:?}; split each by concept (one concept per file, CONVENTIONS.md)"
    );
}

#[test]
fn a_tool_is_written_one_way() {
    // `impl Tool for X`, `impl<H> Tool for X`, `impl troupe_runtime::tool::Tool for X`.
    let implements = |text: &str| {
        text.lines().any(|line| {
            let line = line.trim_start();
            line.starts_with("impl")
                && (line.contains(" Tool for ") || line.contains("::Tool for "))
        })
    };
    // The one way (`FnTool`, what `#[tool]` makes), the gate's wrapper, and
    // the tools made from data at run time (MCP servers', a program's added
    // ones) or for a benchmark.
    let allowed = [
        "runtime/src/tool/func.rs",
        "runtime/src/tool/scoped.rs",
        "actors/src/added_tools.rs",
        "actors/src/mcp/tool.rs",
        "src/bench.rs",
        "src/bench/crash/model.rs",
    ];
    let mut by_hand = Vec::new();
    let mut macros = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let name = relative(&path);
        if implements(&text) && !allowed.contains(&name.as_str()) {
            by_hand.push(name.clone());
        }
        if name.starts_with("tools/src") && text.contains("macro_rules!") {
            macros.push(name);
        }
    }
    assert!(
        by_hand.is_empty(),
        "hand-written `impl Tool` in {by_hand:?}: write the tool as a `#[tool]` function, \
         one file per tool, as a user of the Rust API does"
    );
    assert!(
        macros.is_empty(),
        "a macro that makes tools in {macros:?}: write each as a `#[tool]` function"
    );
}

#[test]
fn the_node_holds_its_features_typed() {
    for file in ["actors/src/node.rs", "actors/src/boot.rs"] {
        let text = std::fs::read_to_string(root().join(file)).expect("readable");
        for erased in ["std::any::Any", "dyn Any", "downcast", "DETACHED"] {
            assert!(
                !text.contains(erased),
                "{file} uses `{erased}`: the node holds the features' handles typed \
                 (`crate::node::Features`, bound by `crate::boot`), never found by type"
            );
        }
    }
}

/// What the node lends a tool call is typed
/// (`troupe_runtime::tool::services::NodeServices`); the type map holds
/// only what a `#[tool]` function keeps between calls, which among the
/// built-in tools is `plan`'s plan and `use_skill`'s skills in use.
#[test]
fn the_node_lends_its_tools_typed_services() {
    let by_type = [
        "services.get::<",
        "services().get::<",
        "services.insert(",
        "services().insert(",
        "services.get_or_insert_with(",
        "services().get_or_insert_with(",
        "services.remove::<",
    ];
    let keep_their_state = ["tools/src/plan.rs", "tools/src/use_skill.rs"];
    let mut found = Vec::new();
    for path in sources() {
        let name = relative(&path);
        if name.starts_with("runtime/src/tool/services")
            || keep_their_state.contains(&name.as_str())
        {
            continue;
        }
        // Without whitespace, so a call split over lines is found too.
        let text: String = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .split_whitespace()
            .collect();
        for lookup in by_type {
            if text.contains(lookup) {
                found.push(format!("{name}: `{lookup}`"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a tool service looked up by type in {found:?}: give what the node lends a typed \
         slot of `NodeServices` (set in actors/src/boot.rs), or what a tool's own actor is \
         to its host when the tools are built (`BrowserExecHost`)"
    );
}

#[test]
fn a_routed_feature_is_one_generic_piece() {
    // Each routed feature (conversations, threads, environments,
    // delegations, a program's kinds) holds a `node::routed::Routed`; none
    // keeps its own router slot.
    let slots: Vec<String> = sources()
        .iter()
        .filter(|path| {
            std::fs::read_to_string(path)
                .unwrap_or_default()
                .contains("RwLock<Option<Router")
        })
        .map(|path| relative(path))
        .collect();
    assert_eq!(
        slots,
        ["actors/src/node/routed.rs"],
        "a feature keeps its own router slot: hold a `Routed` and implement `RoutedKind` \
         (actors/src/node/routed.rs) instead"
    );
}

/// The library is the Rust API: the binary's modules (its CLI, benchmarks,
/// demo, server and telemetry) are compiled only with the `cli` or
/// `server` feature, and the API's own modules name none of them, so an
/// embedder who turns the features off builds neither clap nor axum.
#[test]
fn the_library_compiles_the_binarys_modules_only_behind_its_features() {
    let lib = std::fs::read_to_string(root().join("src/lib.rs")).unwrap();
    let file = syn::parse_file(&lib).unwrap();
    let gated = |item: &syn::ItemMod| {
        item.attrs.iter().any(|a| {
            a.path().is_ident("cfg")
                && a.meta
                    .require_list()
                    .is_ok_and(|l| l.tokens.to_string().starts_with("feature"))
        })
    };
    let binarys = ["bench", "cli", "demo", "progress", "server", "telemetry"];
    let mut seen = Vec::new();
    for item in &file.items {
        if let syn::Item::Mod(m) = item {
            let name = m.ident.to_string();
            if binarys.contains(&name.as_str()) {
                assert!(
                    gated(m),
                    "src/lib.rs: `mod {name}` is the binary's; put it behind \
                     #[cfg(feature = \"cli\")] or #[cfg(feature = \"server\")]"
                );
                seen.push(name);
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen, binarys,
        "src/lib.rs declares each of the binary's modules"
    );

    let mut api = vec![root().join("src/api.rs"), root().join("src/gate.rs")];
    if let Ok(entries) = std::fs::read_dir(root().join("src/api")) {
        api.extend(entries.flatten().map(|e| e.path()));
    }
    for path in api
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
    {
        let text = std::fs::read_to_string(path).unwrap();
        for module in binarys {
            let named = format!("crate::{module}");
            for (n, line) in text.lines().enumerate() {
                if line.contains(&named) {
                    assert!(
                        line.trim_start().starts_with("//"),
                        "{}:{}: the Rust API names `{named}`, which is compiled only with a \
                         feature; move what it needs into the API",
                        relative(path),
                        n + 1
                    );
                }
            }
        }
    }
}

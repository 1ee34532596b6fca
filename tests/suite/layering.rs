//! The actors crate's modules depend one way (docs/runtime-semantics.md,
//! "How the code is layered"): the features on the node, `boot` on the
//! features, and no top-level module imports one that imports it back.
//! Read from the sources, so a new `use crate::…` that closes a loop fails
//! here with the loop named.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its files name with `crate::`.
fn imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap();
            let first = relative.components().next().unwrap().as_os_str();
            let top = first.to_string_lossy().trim_end_matches(".rs").to_string();
            if top == "lib" || top.starts_with("__") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code: String = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let named = graph.entry(top.clone()).or_default();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                if let Some(group) = rest.strip_prefix('{') {
                    // `use crate::{a::X, b};`: each entry's first segment.
                    let end = group.find("};").unwrap_or(group.len());
                    let mut depth = 0;
                    let mut start = true;
                    for (i, c) in group[..end].char_indices() {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            ',' if depth == 0 => start = true,
                            c if start && (c.is_ascii_alphabetic() || c == '_') => {
                                let word: String = group[i..]
                                    .chars()
                                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                                    .collect();
                                named.insert(word);
                                start = false;
                            }
                            _ => {}
                        }
                    }
                } else {
                    let word: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    named.insert(word);
                }
            }
            named.remove(&top);
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for named in graph.values_mut() {
        named.retain(|m| modules.contains(m));
    }
    graph
}

/// A loop of imports, if there is one.
fn find_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in &graph[node] {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_actors_modules_import_one_another_without_a_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("actors/src");
    let graph = imports(&src);
    assert!(graph.contains_key("node") && graph.contains_key("boot"));
    // The reading works: boot names the features, they name the node.
    assert!(graph["boot"].contains("house") && graph["house"].contains("node"));
    if let Some(cycle) = find_loop(&graph) {
        panic!(
            "the actors crate's modules import each other in a loop: {}",
            cycle.join(" → ")
        );
    }
    // The node names no feature.
    for feature in [
        "house",
        "environment",
        "delegation",
        "messaging",
        "review",
        "routine",
    ] {
        assert!(
            !graph["node"].contains(feature),
            "the node imports the feature `{feature}`; wire it in boot.rs instead"
        );
    }
}

#[test]
fn a_loop_is_found_when_there_is_one() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_loop(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}

//! troupe's code depends one way (ARCHITECTURE.md, docs/runtime-semantics.md
//! "How the code is layered"): the crates in the order
//! `troupe-runtime` ← `troupe-tools` ← `troupe-actors` ← `troupe` ← the
//! `troupe` command, and inside each crate no top-level module imports one
//! that imports it back.
//!
//! Read from the sources with `syn`, following the crate's `mod` tree from
//! its root (`#[path]` included): the paths of `use` trees, of types and
//! expressions, and `crate::`/`troupe_…` paths inside macro bodies. `super::`
//! and `self::` are resolved from the module they are written in, and a name
//! the crate root re-exports (`crate::Error`) counts as its module. What is
//! compiled for tests only (`#[cfg(test)]`) is left out: a module's tests
//! may drive it through a module above it. So is the code a macro
//! generates (`quote!`): it is the macro user's, not the macro crate's. A new
//! import that closes a loop, or a lower crate naming a higher one (in its
//! code or its Cargo.toml), fails here with what to change.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Module graph: top-level module → the top-level modules it names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// What the sources of one crate name.
#[derive(Debug, Default)]
struct Reading {
    /// Its top-level modules and the other top-level modules each names.
    graph: Graph,
    /// The other troupe crates it names (`troupe_runtime`, …), with the
    /// file that names each first.
    crates: BTreeMap<String, PathBuf>,
}

/// The troupe crates from the lowest layer up, as code names them; a crate
/// may name only crates before it. The fuzz driver and the macros name
/// none; the command (`src/main.rs`) stands above the library.
const LAYERS: [&str; 6] = [
    "troupe_fuzzing",
    "troupe_macros",
    "troupe_runtime",
    "troupe_tools",
    "troupe_actors",
    "troupe",
];

/// Reads the crate whose root file is `root` (its `lib.rs` or `main.rs`).
fn read_crate(root: &Path) -> Reading {
    let mut reading = Reading::default();
    let file = parse(root);
    // Names the root re-exports, and the top-level modules they come from.
    let mut reexports = BTreeMap::new();
    for item in &file.items {
        if let syn::Item::Use(u) = item {
            let mut leaves = Vec::new();
            use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
            for (path, _, alias) in leaves {
                if let Some(first) = path.first() {
                    reexports.insert(alias, first.clone());
                }
            }
        }
    }
    let mut files = vec![(root.to_path_buf(), Vec::<String>::new())];
    while let Some((path, module)) = files.pop() {
        let file = if module.is_empty() {
            file.clone()
        } else {
            parse(&path)
        };
        let dir = children_dir(&path);
        let mut reader = Reader {
            module,
            dir,
            file: path.clone(),
            named: Vec::new(),
            crates: Vec::new(),
            files: Vec::new(),
        };
        reader.visit_file(&file);
        for krate in reader.crates {
            reading.crates.entry(krate).or_insert_with(|| path.clone());
        }
        files.extend(reader.files);
        for (from, to) in reader.named {
            let to = match reexports.get(&to) {
                Some(module) => module.clone(),
                None => to,
            };
            reading.graph.entry(from).or_default().insert(to);
        }
    }
    // Modules are the ones the root declares; drop what names items of the
    // root itself or extern paths that looked relative.
    let modules: BTreeSet<String> = file
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    reading.graph.retain(|m, _| modules.contains(m));
    for m in &modules {
        reading.graph.entry(m.clone()).or_default();
    }
    for (m, named) in reading.graph.iter_mut() {
        named.retain(|n| n != m && modules.contains(n));
    }
    reading
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// Where the files of the modules a file declares live: beside a crate
/// root or a `mod.rs`, in the folder named after any other file.
fn children_dir(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    if matches!(stem.as_ref(), "lib" | "main" | "mod") {
        parent
    } else {
        parent.join(stem.as_ref())
    }
}

/// A leaf of a `use` tree: the path before it, the name it takes and the
/// name it brings (they differ in `use a::b as c`).
type Leaf = (Vec<String>, String, String);

/// Each leaf of a `use` tree.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Leaf>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            out.push((prefix.clone(), name.clone(), name));
        }
        syn::UseTree::Rename(r) => {
            out.push((prefix.clone(), r.ident.to_string(), r.rename.to_string()));
        }
        syn::UseTree::Glob(_) => out.push((prefix.clone(), "*".into(), "*".into())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// Walks one file, following its module declarations.
struct Reader {
    /// The module being read, from the crate root.
    module: Vec<String>,
    /// Where the files of the modules it declares live.
    dir: PathBuf,
    /// The file being read.
    file: PathBuf,
    /// (top-level module, top-level name it names) pairs.
    named: Vec<(String, String)>,
    /// Troupe crates named.
    crates: Vec<String>,
    /// Module files still to read, with their module paths.
    files: Vec<(PathBuf, Vec<String>)>,
}

impl Reader {
    /// Records a path written in the current module: `segments` in order,
    /// `leaf` the last one when it is a `use` leaf (which may be `self`).
    fn path(&mut self, segments: &[String]) {
        let Some(first) = segments.first() else {
            return;
        };
        let first = first.trim_start_matches("r#");
        if LAYERS.contains(&first) {
            self.crates.push(first.to_string());
            return;
        }
        let absolute: Vec<String> = match first {
            "crate" => segments[1..].to_vec(),
            "self" | "super" => {
                let mut at = self.module.clone();
                let mut rest = segments;
                while let Some((head, tail)) = rest.split_first() {
                    match head.as_str() {
                        "self" => {}
                        "super" => {
                            at.pop();
                        }
                        _ => break,
                    }
                    rest = tail;
                }
                at.extend(rest.iter().cloned());
                at
            }
            // A relative path: inside the root, a top-level module or a
            // re-export; elsewhere it stays in its own module (or is an
            // extern crate's).
            _ if self.module.is_empty() => segments.to_vec(),
            _ => return,
        };
        if let (Some(from), Some(to)) = (self.module.first(), absolute.first()) {
            if to != "self" && to != "*" {
                self.named.push((from.clone(), to.clone()));
            }
        }
    }

    /// `crate :: name` and `troupe_… ::` inside a macro's tokens.
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let trees: Vec<proc_macro2::TokenTree> = tokens.into_iter().collect();
        for (i, tree) in trees.iter().enumerate() {
            match tree {
                proc_macro2::TokenTree::Group(g) => self.tokens(g.stream()),
                proc_macro2::TokenTree::Ident(ident) => {
                    let word = ident.to_string();
                    let colons = matches!(
                        (trees.get(i + 1), trees.get(i + 2)),
                        (
                            Some(proc_macro2::TokenTree::Punct(a)),
                            Some(proc_macro2::TokenTree::Punct(b))
                        ) if a.as_char() == ':' && b.as_char() == ':'
                    );
                    if !colons {
                        continue;
                    }
                    if word == "crate" {
                        if let Some(proc_macro2::TokenTree::Ident(next)) = trees.get(i + 3) {
                            self.path(&["crate".to_string(), next.to_string()]);
                        }
                    } else if LAYERS.contains(&word.as_str()) {
                        self.crates.push(word);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Whether an item is compiled for tests only (`#[cfg(test)]`).
fn for_tests(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
    })
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !for_tests(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let name = m.ident.to_string();
        let explicit = m.attrs.iter().find_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        });
        let mut module = self.module.clone();
        module.push(name.clone());
        match &m.content {
            Some((_, items)) => {
                let inner_dir = self.dir.join(&name);
                let outer_dir = std::mem::replace(&mut self.dir, inner_dir);
                let outer = std::mem::replace(&mut self.module, module);
                for attr in &m.attrs {
                    self.visit_attribute(attr);
                }
                for item in items {
                    self.visit_item(item);
                }
                self.module = outer;
                self.dir = outer_dir;
            }
            None => {
                let file = match explicit {
                    Some(p) => self.file.parent().unwrap_or(Path::new(".")).join(p),
                    None => {
                        let flat = self.dir.join(format!("{name}.rs"));
                        if flat.exists() {
                            flat
                        } else {
                            self.dir.join(&name).join("mod.rs")
                        }
                    }
                };
                assert!(
                    file.exists(),
                    "{}: module `{name}` has no file at {}",
                    self.file.display(),
                    file.display()
                );
                self.files.push((file, module));
            }
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for (mut path, name, _) in leaves {
            path.push(name);
            self.path(&path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.path(&segments);
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        let generated = m
            .path
            .segments
            .last()
            .is_some_and(|s| matches!(s.ident.to_string().as_str(), "quote" | "quote_spanned"));
        if !generated {
            self.tokens(m.tokens.clone());
        }
        syn::visit::visit_macro(self, m);
    }
}

/// A loop of imports, if there is one.
fn find_loop(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
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
        for next in graph.get(node).into_iter().flatten() {
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

/// The troupe crates a package's Cargo.toml depends on, in any table.
fn manifest_crates(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let value: toml::Table = toml::from_str(&text).unwrap();
    let mut found = BTreeSet::new();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        if let Some(deps) = value.get(table).and_then(|t| t.as_table()) {
            for name in deps.keys() {
                let name = name.replace('-', "_");
                if LAYERS.contains(&name.as_str()) {
                    found.insert(name);
                }
            }
        }
    }
    found
}

/// The groups of modules that import one another in a loop (the strongly
/// connected components of more than one module).
fn tangles(graph: &Graph) -> Vec<BTreeSet<String>> {
    let reach = |from: &String| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(m) = todo.pop() {
            for next in graph.get(&m).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    todo.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut found: Vec<BTreeSet<String>> = Vec::new();
    for (m, from_m) in &reaches {
        if !from_m.contains(*m) || found.iter().any(|t| t.contains(*m)) {
            continue;
        }
        let tangle = from_m
            .iter()
            .filter(|n| reaches[n].contains(*m))
            .cloned()
            .collect();
        found.push(tangle);
    }
    found
}

/// What is wrong with the crate `name` reading as `reading`: a loop between
/// its modules other than the `known` ones (or a known one that is gone),
/// or a crate of its layer or above that it names.
fn faults(
    name: &str,
    reading: &Reading,
    manifest: Option<&Path>,
    known: &[&[&str]],
) -> Vec<String> {
    let layer = LAYERS
        .iter()
        .position(|l| *l == name)
        .unwrap_or(LAYERS.len());
    let mut faults = Vec::new();
    let known: Vec<BTreeSet<String>> = known
        .iter()
        .map(|k| k.iter().map(|m| m.to_string()).collect())
        .collect();
    let found = tangles(&reading.graph);
    for tangle in &found {
        if known.contains(tangle) {
            continue;
        }
        let inside: Graph = reading
            .graph
            .iter()
            .filter(|(m, _)| tangle.contains(*m))
            .map(|(m, named)| (m.clone(), named.intersection(tangle).cloned().collect()))
            .collect();
        let cycle = find_loop(&inside).unwrap_or_default();
        faults.push(format!(
            "{name}: its modules import each other in a loop: {} (all of {tangle:?} are \
             tied); move what both need to a lower module, or pass it in",
            cycle.join(" → ")
        ));
    }
    for gone in known.iter().filter(|k| !found.contains(k)) {
        faults.push(format!(
            "{name}: the loop among {gone:?} is untied (or changed): take it off KNOWN_LOOPS"
        ));
    }
    let above = |krate: &str| {
        LAYERS
            .iter()
            .position(|l| *l == krate)
            .is_some_and(|at| at >= layer)
    };
    for (krate, file) in &reading.crates {
        if krate != name && above(krate) {
            faults.push(format!(
                "{name}: {} names `{krate}`, a crate above it; crates depend one way ({})",
                file.display(),
                LAYERS.join(" ← ")
            ));
        }
    }
    for krate in manifest.map(manifest_crates).unwrap_or_default() {
        if krate != name && above(&krate) {
            faults.push(format!(
                "{name}: its Cargo.toml depends on `{krate}`, a crate above it (a \
                 dev-dependency too); crates depend one way ({})",
                LAYERS.join(" ← ")
            ));
        }
    }
    faults
}

/// The loops tolerated, each the whole group of modules it ties: none (the
/// last two were untied by issue 32). A new loop, a module joining one, or
/// one untied and still listed fails the test.
const KNOWN_LOOPS: &[(&str, &[&str])] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn every_crate_depends_one_way_and_its_modules_without_a_loop() {
    let root = root();
    let crates = [
        ("troupe_fuzzing", "fuzzing/src/lib.rs", "fuzzing/Cargo.toml"),
        ("troupe_macros", "macros/src/lib.rs", "macros/Cargo.toml"),
        ("troupe_runtime", "runtime/src/lib.rs", "runtime/Cargo.toml"),
        ("troupe_tools", "tools/src/lib.rs", "tools/Cargo.toml"),
        ("troupe_actors", "actors/src/lib.rs", "actors/Cargo.toml"),
        ("troupe", "src/lib.rs", "Cargo.toml"),
        ("the troupe command", "src/main.rs", "Cargo.toml"),
    ];
    let mut all = Vec::new();
    let mut readings = BTreeMap::new();
    for (name, lib, manifest) in crates {
        let reading = read_crate(&root.join(lib));
        // The command's manifest is the library's: checked once.
        let manifest = (name != "the troupe command").then(|| root.join(manifest));
        let known: Vec<&[&str]> = KNOWN_LOOPS
            .iter()
            .filter(|(krate, _)| *krate == name)
            .map(|(_, modules)| *modules)
            .collect();
        all.extend(faults(name, &reading, manifest.as_deref(), &known));
        readings.insert(name, reading);
    }
    assert!(
        all.is_empty(),
        "the layering is broken:\n{}",
        all.join("\n")
    );

    // The reading works: it sees what is known to be there.
    let actors = &readings["troupe_actors"].graph;
    assert!(actors["boot"].contains("house") && actors["house"].contains("node"));
    let runtime = &readings["troupe_runtime"].graph;
    assert!(runtime["tool"].contains("protocol") && runtime["store"].contains("id"));
    assert!(readings["troupe_tools"]
        .crates
        .contains_key("troupe_runtime"));
    assert!(readings["troupe"].graph["cli"].contains("server"));
    assert!(readings["the troupe command"].crates.contains_key("troupe"));

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
            !actors["node"].contains(feature),
            "the node imports the feature `{feature}`; wire it in boot.rs instead"
        );
    }
    // The wire types name nothing but ids: no tool, no service.
    let protocol: Vec<&String> = runtime["protocol"].iter().filter(|m| *m != "id").collect();
    assert!(
        protocol.is_empty(),
        "runtime's protocol (the wire types) imports {protocol:?}; it may name only `id`"
    );
}

/// Writes a crate's files under a temporary folder and reads it.
fn read_sources(files: &[(&str, &str)]) -> Reading {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    read_crate(&dir.path().join("lib.rs"))
}

#[test]
fn a_loop_through_use_trees_super_paths_and_macros_is_found() {
    // `a` names `b` through a grouped use tree, `b` names `c` through a
    // `super::` path in a submodule read by `#[path]`, and `c` names `a`
    // through a re-export of the root inside a macro body. What `d`'s
    // tests and a `quote!` name does not count.
    let reading = read_sources(&[
        (
            "lib.rs",
            "mod a; mod b; mod c; mod d;\npub use a::Thing;\n// crate::d in a comment\n",
        ),
        (
            "a.rs",
            "use crate::{b::{self, B}, d as _};\npub struct Thing;\n",
        ),
        (
            "b.rs",
            "#[path = \"b_more.rs\"]\nmod more;\npub struct B;\n",
        ),
        ("b_more.rs", "fn f() -> super::super::c::C { todo!() }\n"),
        (
            "c.rs",
            "pub struct C;\nfn f() { println!(\"{:?}\", crate::Thing); }\n",
        ),
        (
            "d.rs",
            "/// [`crate::a`] in a doc comment is no import.\npub struct D;\n\
             #[cfg(test)]\nmod tests { use crate::c::C; }\n\
             fn g() { let _ = quote!(crate::b::B); }\n",
        ),
    ]);
    assert_eq!(reading.graph["a"], ["b", "d"].map(String::from).into());
    assert_eq!(reading.graph["b"], ["c"].map(String::from).into());
    assert_eq!(reading.graph["c"], ["a"].map(String::from).into());
    assert!(reading.graph["d"].is_empty());
    assert_eq!(
        find_loop(&reading.graph),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    let faults = faults("troupe_tools", &reading, None, &[]);
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(faults[0].contains("a → b → c → a"), "{}", faults[0]);
}

#[test]
fn a_lower_crate_naming_a_higher_one_is_found() {
    let reading = read_sources(&[
        ("lib.rs", "mod a;\n"),
        (
            "a/mod.rs",
            "mod inner { pub fn f() { let _ = troupe_actors::node::Node::start; } }\n",
        ),
    ]);
    assert!(reading.crates.contains_key("troupe_actors"));
    let found = faults("troupe_tools", &reading, None, &[]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("names `troupe_actors`, a crate above it"),
        "{}",
        found[0]
    );
    // The same is allowed one layer up.
    assert!(faults("troupe", &reading, None, &[]).is_empty());
}

//! The house's rules on imports, read from the sources with `syn` (so anyone can rerun the count:
//! `cargo test -p xcsp-tests --test imports -- --nocapture` prints every crate's module graph).
//!
//! - **No circle in any crate.** A module and everything under it count as one unit; at every level
//!   of the module tree, the units beside each other (siblings) must not import each other round a
//!   circle. A child using its parent's items (`super::Ctx`) and a parent using its children are not
//!   circles: a `mod.rs` is the interface of its directory.
//! - **The local world in floors.** Each of `sim`'s top-level modules sits on a floor
//!   ([`SIM_FLOORS`]); a module imports only modules on floors below its own, so peers on one floor
//!   (ARM and AWS) never import each other.
//!
//! What counts as an import: every path in the code (`use` trees, types, expressions, patterns,
//! and the `crate::`/`super::` paths inside macro calls), resolved to the deepest module it names,
//! through `pub use` re-exports, and for bare paths through the file's own child modules and its
//! glob imports. Doc comments do not count.

use petgraph::algo::tarjan_scc;
use petgraph::graph::DiGraph;
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// `sim`'s floors, lowest first: the shared leaves, the world (clock, faults, journal, ids), the
/// two clouds (peers), the link between them, the cluster (the upstream control plane, then the
/// stand-ins that are its clients), and the front that holds everything.
const SIM_FLOORS: &[(&str, &[&str])] = &[
    ("leaves", &["release", "ports", "child", "proxy"]),
    ("world", &["world"]),
    ("clouds", &["arm", "aws"]),
    ("link", &["link"]),
    ("upstream cluster", &["cluster"]),
    ("stand-ins", &["kube"]),
    ("the world whole", &["whole"]),
    ("handlers", &["admin", "front"]),
    ("server", &["server"]),
    ("binary", &["main"]),
];

/// A module path inside one crate (`["arm", "store"]`; the crate root is empty).
type Module = Vec<String>;

/// A crate's module graph: every module, with the modules its code names.
type Crate = BTreeMap<Module, BTreeSet<Module>>;

/// What one file says, before paths are resolved.
#[derive(Default)]
struct FileFacts {
    /// Paths as written, with the module they were written in (inline `mod` blocks included).
    paths: Vec<(Module, Vec<String>)>,
    /// `pub use` re-exports: (module, name) → the path it re-exports.
    reexports: Vec<(Module, String, Vec<String>)>,
    /// Glob imports: module → the paths globbed (`use super::*`).
    globs: Vec<(Module, Vec<String>)>,
    /// Modules declared (`mod x;` or `mod x { .. }`).
    modules: Vec<Module>,
}

struct Reader<'f> {
    at: Module,
    facts: &'f mut FileFacts,
}

impl Reader<'_> {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree, public: bool) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree, public);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.used(prefix, n.ident.to_string(), n.ident.to_string(), public),
            syn::UseTree::Rename(r) => self.used(prefix, r.ident.to_string(), r.rename.to_string(), public),
            syn::UseTree::Glob(_) => {
                self.facts.paths.push((self.at.clone(), prefix.clone()));
                self.facts.globs.push((self.at.clone(), prefix.clone()));
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t, public);
                }
            }
        }
    }

    fn used(&mut self, prefix: &[String], name: String, alias: String, public: bool) {
        let mut path = prefix.to_vec();
        if name != "self" {
            path.push(name);
        }
        if public {
            self.facts.reexports.push((self.at.clone(), alias, path.clone()));
        }
        self.facts.paths.push((self.at.clone(), path));
    }

    /// `crate::a::b`, `super::x`, `self::y` inside a macro's tokens (`json!`, `assert_eq!`, ...).
    fn tokens(&mut self, tokens: TokenStream) {
        let flat: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < flat.len() {
            match &flat[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id) if ["crate", "super", "self"].contains(&id.to_string().as_str()) => {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while j + 2 < flat.len()
                        && matches!(&flat[j], TokenTree::Punct(p) if p.as_char() == ':')
                        && matches!(&flat[j + 1], TokenTree::Punct(p) if p.as_char() == ':')
                    {
                        let TokenTree::Ident(next) = &flat[j + 2] else { break };
                        path.push(next.to_string());
                        j += 3;
                    }
                    if path.len() > 1 {
                        self.facts.paths.push((self.at.clone(), path));
                    }
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

impl<'ast> Visit<'ast> for Reader<'_> {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let public = !matches!(u.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &u.tree, public);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.at.push(m.ident.to_string());
        self.facts.modules.push(self.at.clone());
        if let Some((_, items)) = &m.content {
            for item in items {
                self.visit_item(item);
            }
        }
        self.at.pop();
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            self.facts.paths.push((self.at.clone(), p.segments.iter().map(|s| s.ident.to_string()).collect()));
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// The module a source file is: `src/lib.rs` and `src/main.rs` the root (`main` for a binary
/// beside a library), `src/a/mod.rs` and `src/a.rs` `a`, `src/a/b.rs` `a::b`.
fn module_of(src: &Path, file: &Path, has_lib: bool) -> Module {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    match (parts.is_empty(), stem) {
        (true, "lib") => Vec::new(),
        (true, "main") if !has_lib => Vec::new(),
        (_, "mod") => parts,
        _ => {
            parts.push(stem.to_string());
            parts
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Reads a crate's `src/` (its `src/bin` programs are roots of their own, left out) and resolves
/// every path its code writes to the module it names.
fn read_crate(src: &Path) -> Crate {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let has_lib = src.join("lib.rs").exists();
    let mut facts = FileFacts::default();
    let mut known: BTreeSet<Module> = BTreeSet::from([Vec::new()]);
    for file in files.iter().filter(|f| !f.starts_with(src.join("bin"))) {
        let text = std::fs::read_to_string(file).expect("a readable source");
        let syntax = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let at = module_of(src, file, has_lib);
        known.insert(at.clone());
        let mut reader = Reader { at, facts: &mut facts };
        reader.visit_file(&syntax);
    }
    known.extend(facts.modules.iter().cloned());
    let reexports: BTreeMap<(Module, String), Vec<String>> =
        facts.reexports.iter().map(|(m, name, path)| ((m.clone(), name.clone()), path.clone())).collect();
    let mut globs: BTreeMap<Module, Vec<Vec<String>>> = BTreeMap::new();
    for (m, path) in &facts.globs {
        globs.entry(m.clone()).or_default().push(path.clone());
    }
    let resolver = Resolver { known: &known, reexports: &reexports, globs: &globs };
    let mut krate = Crate::default();
    for m in &known {
        krate.entry(m.clone()).or_default();
    }
    for (at, path) in &facts.paths {
        if let Some(target) = resolver.resolve(at, path, 0) {
            krate.get_mut(at).expect("a known module").insert(target);
        }
    }
    krate
}

struct Resolver<'r> {
    known: &'r BTreeSet<Module>,
    reexports: &'r BTreeMap<(Module, String), Vec<String>>,
    globs: &'r BTreeMap<Module, Vec<Vec<String>>>,
}

impl Resolver<'_> {
    /// The deepest known module `path` (written in module `at`) names, following re-exports.
    fn resolve(&self, at: &Module, path: &[String], depth: usize) -> Option<Module> {
        if depth > 8 || path.is_empty() {
            return None;
        }
        let absolute = self.absolute(at, path)?;
        let mut module: Module = Vec::new();
        let mut rest = absolute.as_slice();
        while let Some((first, tail)) = rest.split_first() {
            let mut deeper = module.clone();
            deeper.push(first.clone());
            if self.known.contains(&deeper) {
                module = deeper;
                rest = tail;
                continue;
            }
            if let Some(target) = self.reexports.get(&(module.clone(), first.clone())) {
                let mut next = target.clone();
                next.extend(tail.iter().cloned());
                return self.resolve(&module, &next, depth + 1).or(Some(module));
            }
            break;
        }
        Some(module)
    }

    /// `path` from the crate's root, or `None` when it names another crate (or a local name).
    fn absolute(&self, at: &Module, path: &[String]) -> Option<Vec<String>> {
        self.absolute_in(at, path, true)
    }

    fn absolute_in(&self, at: &Module, path: &[String], through_globs: bool) -> Option<Vec<String>> {
        let mut base = at.clone();
        let mut rest = path;
        match path[0].as_str() {
            "crate" => return Some(path[1..].to_vec()),
            "self" => rest = &path[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            first => {
                let mut child = at.clone();
                child.push(first.to_string());
                if !self.known.contains(&child) {
                    if !through_globs {
                        return None;
                    }
                    // Through a glob import (`use super::*` brings the parent's modules in scope).
                    let globbed = self.globs.get(at).into_iter().flatten().find_map(|g| {
                        let mut from = self.absolute_in(at, g, false)?;
                        from.push(first.to_string());
                        self.known.contains(&from).then_some(from)
                    })?;
                    let mut out = globbed;
                    out.extend(path[1..].iter().cloned());
                    return Some(out);
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }
}

/// A circle among the units under one module, with the imports that tie them.
struct Circle {
    parent: String,
    /// Sorted.
    units: Vec<String>,
    ties: Vec<String>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "under `{}`: {{{}}} ({})", self.parent, self.units.join(", "), self.ties.join("; "))
    }
}

/// The circles among siblings, at every level of the module tree.
fn circles(krate: &Crate) -> Vec<Circle> {
    let mut parents: BTreeSet<Module> = BTreeSet::new();
    for m in krate.keys() {
        for depth in 0..m.len() {
            parents.insert(m[..depth].to_vec());
        }
    }
    let mut found = Vec::new();
    for parent in &parents {
        // The unit under `parent` a module belongs to, if any (the parent itself is none).
        let unit = |m: &Module| (m.len() > parent.len() && m.starts_with(parent)).then(|| m[parent.len()].clone());
        let mut graph = DiGraph::<String, (Module, Module)>::new();
        let mut index = BTreeMap::new();
        for (from, tos) in krate {
            let Some(a) = unit(from) else { continue };
            for to in tos {
                let Some(b) = unit(to) else { continue };
                if a == b {
                    continue;
                }
                let ia = *index.entry(a.clone()).or_insert_with(|| graph.add_node(a.clone()));
                let ib = *index.entry(b.clone()).or_insert_with(|| graph.add_node(b.clone()));
                graph.update_edge(ia, ib, (from.clone(), to.clone()));
            }
        }
        for scc in tarjan_scc(&graph) {
            if scc.len() < 2 {
                continue;
            }
            let members: BTreeSet<_> = scc.iter().copied().collect();
            let ties: Vec<String> = graph
                .edge_indices()
                .filter_map(|e| {
                    let (a, b) = graph.edge_endpoints(e)?;
                    (members.contains(&a) && members.contains(&b)).then(|| {
                        let (from, to) = &graph[e];
                        format!("{} -> {}", from.join("::"), to.join("::"))
                    })
                })
                .collect();
            let mut units: Vec<String> = scc.iter().map(|i| graph[*i].clone()).collect();
            units.sort();
            found.push(Circle { parent: parent.join("::"), units, ties });
        }
    }
    found
}

/// Every import from a module to one on the same floor or a higher one.
fn upward(krate: &Crate, floors: &[(&str, &[&str])]) -> Vec<String> {
    let floor_of = |m: &Module| -> Option<usize> {
        let top = m.first()?;
        floors.iter().position(|(_, members)| members.contains(&top.as_str()))
    };
    let mut found = Vec::new();
    for (from, tos) in krate {
        let Some(top) = from.first() else { continue };
        let Some(own) = floor_of(from) else {
            found.push(format!("`{top}` is on no floor: add it to the floors"));
            continue;
        };
        for to in tos {
            let Some(other) = floor_of(to) else { continue };
            if to.first() != from.first() && other >= own {
                found.push(format!(
                    "{} (floor `{}`) imports {} (floor `{}`)",
                    from.join("::"),
                    floors[own].0,
                    to.join("::"),
                    floors[other].0
                ));
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Every crate of the workspace: the directories holding a `Cargo.toml` and a `src/`.
fn workspace_crates() -> Vec<PathBuf> {
    let root = xcsp_tests::root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
    let line = manifest.lines().find(|l| l.starts_with("members")).expect("a members line");
    let crates: Vec<PathBuf> = line.split('"').skip(1).step_by(2).map(|member| root.join(member).join("src")).collect();
    assert!(crates.len() > 10, "the members line read as {crates:?}");
    crates
}

fn print_graph(name: &str, krate: &Crate) {
    println!("== {name}");
    for (from, tos) in krate {
        let name = |m: &Module| if m.is_empty() { "(root)".to_string() } else { m.join("::") };
        let tos: Vec<String> = tos.iter().filter(|t| *t != from).map(name).collect();
        if !tos.is_empty() {
            println!("  {} -> {}", name(from), tos.join(", "));
        }
    }
}

#[test]
fn no_crate_has_an_import_circle() {
    let mut found = Vec::new();
    for src in workspace_crates() {
        let krate = read_crate(&src);
        let name = src.parent().and_then(Path::file_name).expect("a crate directory").to_string_lossy().into_owned();
        print_graph(&name, &krate);
        found.extend(circles(&krate).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn each_floor_of_the_world_imports_only_the_floors_below_it() {
    let krate = read_crate(&xcsp_tests::root().join("sim/src"));
    let found = upward(&krate, SIM_FLOORS);
    assert!(found.is_empty(), "imports against the floors:\n{}", found.join("\n"));
}

/// The checker itself: a small crate with one upward import and one circle is caught on both
/// counts, and the same crate with the import turned round passes.
#[test]
fn the_checker_catches_an_upward_import_and_a_circle() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("src");
    let write = |rel: &str, text: &str| {
        let path = src.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(path, text).expect("a file");
    };
    write("lib.rs", "pub mod low;\npub mod high;\npub mod a;\npub mod b;\n");
    write("high.rs", "pub struct Top;\n");
    write("low.rs", "use crate::high::Top;\npub fn f(_: Top) {}\n");
    write("a/mod.rs", "mod inner;\npub use inner::Thing;\n");
    write("a/inner.rs", "pub struct Thing(pub crate::b::Other);\n");
    write("b.rs", "pub struct Other;\npub fn g() -> Option<super::a::Thing> { None }\n");
    let floors: &[(&str, &[&str])] = &[("low", &["low"]), ("b", &["b"]), ("a", &["a"]), ("high", &["high"])];
    let krate = read_crate(&src);
    assert_eq!(
        upward(&krate, floors),
        ["b (floor `b`) imports a::inner (floor `a`)", "low (floor `low`) imports high (floor `high`)"]
    );
    let found = circles(&krate);
    assert_eq!(found.len(), 1, "{}", found.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("\n"));
    assert_eq!(
        (found[0].parent.as_str(), found[0].units.as_slice()),
        ("", ["a".to_string(), "b".to_string()].as_slice())
    );
    assert!(
        found[0].ties.contains(&"a::inner -> b".to_string()) && found[0].ties.contains(&"b -> a::inner".to_string())
    );

    write("low.rs", "pub struct Top;\n");
    write("high.rs", "use crate::low::Top;\npub fn f(_: Top) {}\n");
    write("b.rs", "pub struct Other;\n");
    let krate = read_crate(&src);
    assert_eq!(upward(&krate, floors), Vec::<String>::new());
    assert!(circles(&krate).is_empty());
}

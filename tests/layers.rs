//! The layers of `src/`, bottom to top, and a check that no module reaches
//! one above it or beside it. docs/architecture.md ("Layers") states the
//! same order; a test below keeps the two equal.
//!
//! Plain Rust over the source text: comments, strings and character
//! literals are blanked out, then every path starting at the crate root is
//! followed to the top-level module it names: `crate::x` (in `use` lines,
//! `use crate::{x, y}` groups and inline code alike, `$crate::x` in macros
//! too) and `super::…::x` once the `super`s have climbed to the crate root.
//! The askama templates are compiled into `web`, so they are read as part of
//! it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Bottom to top. A module may use the modules of the layers below its own,
/// never one above it, nor another module of its own layer (those are
/// independent of each other).
const LAYERS: &[&[&str]] = &[
    // Knows nothing of the product's flow: values parsed once, the clock,
    // metric primitives, logging, the User-Agent and country classifiers.
    &["domain", "clock", "metrics", "telemetry", "classify"],
    &["journal"],
    &["storage"],
    &["ingest", "preallocation", "reports", "accounts", "demo"],
    // Replays a peer's rows through the pixel's own rules (its visits
    // table, its utm rule); composes and sends the email reports and
    // alerts from the reports' figures.
    &["import", "email"],
    // Composes the indexes each module below declares.
    &["indexes"],
    &["web"],
    // Parses the environment and flags into each module's own config type;
    // starts the embedded database.
    &["settings", "localdb"],
    // Builds and runs the application: its state, middleware and
    // background tasks, and `serve`'s steps before it.
    &["app"],
    &["cli"],
];

/// The crate roots: they declare the modules (`lib.rs`) or call `cli`
/// (`main.rs`, a crate of its own), and belong to no layer.
const ROOTS: &[&str] = &["lib.rs", "main.rs"];

/// Where the askama templates live (all compiled into `web`).
const TEMPLATES: (&str, &str) = ("templates", "web");

#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    file: String,
    line: usize,
    from: String,
    to: String,
    code: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let why = match (layer_of(&self.from), layer_of(&self.to)) {
            (_, None) => "which is in no layer",
            (Some(a), Some(b)) if a == b => "beside it in the same layer",
            _ => "a layer above it",
        };
        write!(
            f,
            "{}:{}: {} uses {}, {}: {}",
            self.file, self.line, self.from, self.to, why, self.code
        )
    }
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// Whether `from` may name `to`.
fn allowed(from: &str, to: &str) -> bool {
    from == to
        || matches!(
            (layer_of(from), layer_of(to)),
            (Some(a), Some(b)) if b < a
        )
}

/// The module path of a file under `src/`: `web/api/auth.rs` is
/// `[web, api, auth]`, `storage/mod.rs` is `[storage]`.
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The source with comments, string and character literals replaced by
/// spaces (new lines kept), so only code is left and lines still count.
fn code_only(source: &str) -> Vec<char> {
    let s: Vec<char> = source.chars().collect();
    let mut out = s.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(s.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let end = s[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(s.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            // Block comments nest.
            let (mut depth, mut j) = (0, i);
            while j < s.len() {
                if s[j] == '/' && s.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if s[j] == '*' && s.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if ident(c) && (i == 0 || !ident(s[i - 1])) {
            let end = s[i..]
                .iter()
                .position(|&c| !ident(c))
                .map_or(s.len(), |p| i + p);
            let word: String = s[i..end].iter().collect();
            // Raw strings: r"…", r#"…"#, br"…", cr#"…"#.
            let hashes = s[end..].iter().take_while(|&&c| c == '#').count();
            if matches!(word.as_str(), "r" | "br" | "cr") && s.get(end + hashes) == Some(&'"') {
                let body = end + hashes + 1;
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let stop = (body..s.len())
                    .find(|&k| s[k..].starts_with(&close))
                    .map_or(s.len(), |k| k + close.len());
                blank(&mut out, body, stop.saturating_sub(close.len()));
                i = stop;
            } else {
                // b"…" and c"…" are ordinary strings after their prefix.
                i = end;
            }
        } else if c == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..s.len()).find(|&k| s[k] == '\'')
            } else if s.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Reads a path from `at`: its `::`-separated segments up to the first
/// that is not a plain name, and for a `{…}` group, the first segment of
/// each of its items (with where it starts).
struct PathReader<'a> {
    code: &'a [char],
}

impl PathReader<'_> {
    fn skip_space(&self, mut at: usize) -> usize {
        while at < self.code.len() && self.code[at].is_whitespace() {
            at += 1;
        }
        at
    }

    fn word(&self, at: usize) -> Option<(String, usize)> {
        let end = (at..self.code.len())
            .find(|&k| !(self.code[k].is_alphanumeric() || self.code[k] == '_'))
            .unwrap_or(self.code.len());
        (end > at).then(|| (self.code[at..end].iter().collect(), end))
    }

    /// After `::` (with spaces around it allowed), where the next segment starts.
    fn separator(&self, at: usize) -> Option<usize> {
        let at = self.skip_space(at);
        (self.code.get(at) == Some(&':') && self.code.get(at + 1) == Some(&':'))
            .then(|| self.skip_space(at + 2))
    }

    /// The names a path segment at `at` brings into reach, and where each
    /// starts: one name, or the first name of each item of a group.
    fn heads(&self, at: usize) -> Vec<(String, usize)> {
        match self.code.get(at) {
            Some('{') => {
                let mut heads = Vec::new();
                let (mut depth, mut k, mut item_start) = (0, at, true);
                while k < self.code.len() {
                    match self.code[k] {
                        '{' => {
                            depth += 1;
                            if depth == 1 {
                                item_start = true;
                            }
                        }
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        ',' if depth == 1 => item_start = true,
                        c if item_start && depth == 1 && !c.is_whitespace() => {
                            item_start = false;
                            let name = self.word(k).map_or_else(|| c.to_string(), |(w, _)| w);
                            heads.push((name, k));
                        }
                        _ => {}
                    }
                    k += 1;
                }
                heads
            }
            Some('*') => vec![("*".to_owned(), at)],
            _ => self.word(at).map(|(w, _)| (w, at)).into_iter().collect(),
        }
    }
}

/// Every name `relative` (a path under `src/`, or under the templates for
/// `in_module`) reaches at the crate root, with the 1-based line of each.
fn crate_root_uses(relative: &str, source: &str, templates: bool) -> Vec<(String, usize)> {
    let code = if templates {
        source.chars().collect()
    } else {
        code_only(source)
    };
    let reader = PathReader { code: &code };
    let file_depth = if templates {
        0
    } else {
        module_path(relative).len()
    };
    let line_at = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;
    let mut found = Vec::new();
    // Brace depths at which inline `mod name { … }` blocks opened: each
    // is one more `super` between the code inside and the crate root.
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut opens_mod: Option<usize> = None;
    let mut depth = 0;
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c == '{' {
            depth += 1;
            if opens_mod == Some(i) {
                inline_mods.push(depth);
            }
            i += 1;
            continue;
        }
        if c == '}' {
            if inline_mods.last() == Some(&depth) {
                inline_mods.pop();
            }
            depth -= 1;
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !(code[i - 1].is_alphanumeric() || code[i - 1] == '_');
        let Some((word, end)) = starts_word.then(|| reader.word(i)).flatten() else {
            i += 1;
            continue;
        };
        match word.as_str() {
            "mod" => {
                let name = reader.skip_space(end);
                if let Some((_, after)) = reader.word(name) {
                    let brace = reader.skip_space(after);
                    if code.get(brace) == Some(&'{') {
                        opens_mod = Some(brace);
                    }
                }
            }
            "crate" => {
                if let Some(next) = reader.separator(end) {
                    found.extend(reader.heads(next));
                }
            }
            "super" => {
                let mut climbed = 1;
                let mut next = reader.separator(end);
                while let Some(at) = next {
                    match reader.word(at) {
                        Some((w, after)) if w == "super" => {
                            climbed += 1;
                            next = reader.separator(after);
                        }
                        _ => break,
                    }
                }
                if let Some(at) = next {
                    if climbed >= file_depth + inline_mods.len() {
                        found.extend(reader.heads(at));
                    }
                }
            }
            _ => {}
        }
        i = end;
    }
    found
        .into_iter()
        .filter(|(name, _)| name != "self")
        .map(|(name, at)| (name, line_at(at)))
        .collect()
}

/// The uses in one file of module `from` that the layers forbid.
fn check(
    display: &str,
    relative: &str,
    from: &str,
    source: &str,
    templates: bool,
) -> Vec<Violation> {
    let lines: Vec<&str> = source.lines().collect();
    crate_root_uses(relative, source, templates)
        .into_iter()
        .filter(|(to, _)| !allowed(from, to))
        .map(|(to, line)| Violation {
            file: display.to_owned(),
            line,
            from: from.to_owned(),
            to,
            code: lines.get(line - 1).map_or("", |l| l.trim()).to_owned(),
        })
        .collect()
}

/// Checks a file of `src/`, named relative to it.
fn check_source(relative: &str, source: &str) -> Vec<Violation> {
    let from = module_path(relative).remove(0);
    check(&format!("src/{relative}"), relative, &from, source, false)
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files_under(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == extension) {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .expect("under the base")
        .to_string_lossy()
        .replace('\\', "/")
}

/// A blanking gone wrong (a literal read as never ending) would hide code
/// and let anything pass: every line that plainly starts with `use crate::`
/// must be among the uses found.
fn lost_no_use_line(relative: &str, source: &str) {
    let found: BTreeSet<usize> = crate_root_uses(relative, source, false)
        .into_iter()
        .map(|(_, line)| line)
        .collect();
    for (n, line) in source.lines().enumerate() {
        let line = line.trim_start();
        let line = line.strip_prefix("pub ").unwrap_or(line);
        if line.starts_with("use crate::") && !line.starts_with("use crate::{") {
            assert!(
                found.contains(&(n + 1)),
                "the checker lost track of the code at src/{relative}:{}",
                n + 1
            );
        }
    }
}

#[test]
fn no_module_uses_one_above_or_beside_it() {
    let src = root().join("src");
    let mut violations = Vec::new();
    for path in files_under(&src, "rs") {
        let rel = relative(&path, &src);
        if ROOTS.contains(&rel.as_str()) {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("readable source");
        lost_no_use_line(&rel, &source);
        violations.extend(check_source(&rel, &source));
    }
    let (dir, module) = TEMPLATES;
    let templates = root().join(dir);
    for path in files_under(&templates, "html") {
        let source = std::fs::read_to_string(&path).expect("readable template");
        let display = format!("{dir}/{}", relative(&path, &templates));
        violations.extend(check(&display, "", module, &source, true));
    }
    assert!(
        violations.is_empty(),
        "{} use(s) break the layers (docs/architecture.md, \"Layers\"); move the shared piece down, \
         or change the order here and in the docs if the design changed:\n{}",
        violations.len(),
        violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let src = root().join("src");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&src)
        .expect("src/")
        .map(|e| e.expect("entry").path())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            if p.is_dir() {
                Some(name)
            } else if name.ends_with(".rs") && !ROOTS.contains(&name.as_str()) {
                Some(name.trim_end_matches(".rs").to_owned())
            } else {
                None
            }
        })
        .collect();
    let placed: BTreeSet<String> = LAYERS
        .iter()
        .flat_map(|l| l.iter().map(|m| (*m).to_owned()))
        .collect();
    assert_eq!(
        on_disk, placed,
        "every module in src/ must have exactly one layer in LAYERS (and docs/architecture.md)"
    );
}

#[test]
fn the_documented_order_is_this_one() {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs");
    let marker = "<!-- layers: top to bottom, checked by tests/layers.rs -->";
    let after = doc
        .split_once(marker)
        .unwrap_or_else(|| panic!("docs/architecture.md lost the line {marker}"))
        .1;
    let block = after
        .split("```")
        .nth(1)
        .expect("a fenced block after the marker");
    let documented: Vec<Vec<String>> = block
        .lines()
        .skip(1) // the fence's info string
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(|m| m.trim().to_owned()).collect())
        .collect();
    let ours: Vec<Vec<String>> = LAYERS
        .iter()
        .rev()
        .map(|l| l.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    assert_eq!(documented, ours, "docs/architecture.md and LAYERS disagree");
}

// The checker itself: it must see each way of reaching up, and nothing else.

fn reached(relative: &str, source: &str) -> Vec<(String, usize)> {
    check_source(relative, source)
        .into_iter()
        .map(|v| (v.to, v.line))
        .collect()
}

#[test]
fn an_upward_use_line_is_reported_with_file_line_and_code() {
    let v = check_source(
        "storage/site_totals.rs",
        "use bson::doc;\nuse crate::domain::Page;\nuse crate::web::fmt::thousands;\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(
        v[0].to_string(),
        "src/storage/site_totals.rs:3: storage uses web, a layer above it: \
         use crate::web::fmt::thousands;"
    );
}

#[test]
fn inline_paths_groups_and_macros_are_followed() {
    let source = "fn range(d: &D) -> Document {\n    crate::reports::queries::site_pages(d)\n}\n\
                  use crate::{\n    domain::Page,\n    ingest::pixel,\n};\n\
                  macro_rules! m { () => { $crate::web::x() } }\n\
                  fn f() { let _ = crate :: settings :: X; }\n";
    assert_eq!(
        reached("storage/x.rs", source),
        [
            ("reports".to_owned(), 2),
            ("ingest".to_owned(), 6),
            ("web".to_owned(), 8),
            ("settings".to_owned(), 9),
        ]
    );
}

#[test]
fn super_paths_are_reported_once_they_climb_to_the_crate_root() {
    let source = "use super::Store;\nuse super::super::web::fmt;\n\
                  mod tests {\n    use super::super::Resolution;\n    use super::super::super::cli::main;\n}\n\
                  fn after() { super::super::reports::x(); }\n";
    assert_eq!(
        reached("storage/sites.rs", source),
        [
            ("web".to_owned(), 2),
            ("cli".to_owned(), 5),
            ("reports".to_owned(), 7),
        ]
    );
    // A file of a deeper module needs one more `super` per level.
    assert_eq!(
        reached(
            "web/api/auth.rs",
            "use super::super::super::app::X;\nuse super::super::error::E;\n"
        ),
        [("app".to_owned(), 1)]
    );
}

#[test]
fn siblings_are_reported_and_lower_layers_are_not() {
    assert_eq!(
        reached(
            "reports/chart.rs",
            "use crate::ingest::pixel;\nuse crate::storage::Store;\nuse crate::domain::Page;\nuse crate::reports::Period;\n"
        ),
        [("ingest".to_owned(), 1)]
    );
    assert!(reached(
        "web/admin.rs",
        "use crate::storage::Store;\nuse crate::accounts::User;\nuse crate::{journal, classify};\n"
    )
    .is_empty());
    assert!(reached(
        "cli.rs",
        "use crate::app::Application;\nuse crate::web::snippets;\n"
    )
    .is_empty());
}

#[test]
fn comments_strings_and_visibility_are_not_uses() {
    let source = "// crate::web::fmt\n/* crate::web /* nested */ crate::web */\n\
                  /// [`crate::web::x`]\nconst A: &str = \"crate::web::x\";\n\
                  const B: &str = r#\"use crate::web::x; \"quoted\"\"#;\n\
                  const C: char = '\"';\nfn f<'a>(x: &'a str) {}\n\
                  pub(crate) fn g() {}\npub(super) fn h() {}\n";
    assert!(reached("storage/x.rs", source).is_empty());
    // Code after a tricky literal is still read.
    assert_eq!(
        reached("storage/x.rs", "const C: char = '\"'; use crate::web::x;\n"),
        [("web".to_owned(), 1)]
    );
}

#[test]
fn a_module_in_no_layer_and_a_glob_of_the_root_are_reported() {
    assert_eq!(
        reached("storage/x.rs", "use crate::newthing::X;\nuse crate::*;\n"),
        [("newthing".to_owned(), 1), ("*".to_owned(), 2)]
    );
}

#[test]
fn templates_count_as_web() {
    let v = check(
        "templates/x.html",
        "",
        "web",
        "{{ crate::web::fmt::thousands(n) }}\n{{ crate::cli::main() }}\n",
        true,
    );
    assert_eq!(
        v.iter()
            .map(|v| (v.to.as_str(), v.line))
            .collect::<Vec<_>>(),
        [("cli", 2)]
    );
}

/// The layers below `web` that must not know the web framework: HTTP
/// handlers, extractors and middleware belong in `web`, so the rules they
/// call can be used (and tested) without a request.
const FREE_OF_ACTIX: &[&str] = &[
    "domain",
    "journal",
    "storage",
    "ingest",
    "reports",
    "accounts",
    "preallocation",
    "import",
];

/// The lines of a source that name `actix` in code (not in comments or
/// strings), numbered from 1.
fn actix_lines(source: &str) -> Vec<usize> {
    let code: String = code_only(source).into_iter().collect();
    code.lines()
        .enumerate()
        .filter(|(_, line)| {
            line.match_indices("actix").any(|(at, _)| {
                let before = line[..at].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
        .map(|(n, _)| n + 1)
        .collect()
}

#[test]
fn the_layers_below_web_do_not_use_actix() {
    assert_eq!(actix_lines("use actix_web::HttpRequest;\n"), [1]);
    assert_eq!(
        actix_lines(
            "// actix_web\nfn f(r: &::actix_web::HttpRequest) {}\nconst S: &str = \"actix\";\n"
        ),
        [2]
    );
    let src = root().join("src");
    let mut found = Vec::new();
    for module in FREE_OF_ACTIX {
        let dir = src.join(module);
        let files = if dir.is_dir() {
            files_under(&dir, "rs")
        } else {
            vec![src.join(format!("{module}.rs"))]
        };
        for path in files {
            let source = std::fs::read_to_string(&path).expect("readable source");
            for line in actix_lines(&source) {
                found.push(format!("src/{}:{line}", relative(&path, &src)));
            }
        }
    }
    assert!(
        found.is_empty(),
        "actix below `web` (move the handler, extractor or middleware into web/):\n{}",
        found.join("\n")
    );
}

/// Where a file's code (comments and literals blanked) names a collection:
/// opens one (`.collection(name)`, `.collection::<T>(name)`) or declares a
/// `…COLLECTION…` constant. `Resolution::collection()` without arguments
/// only reads a name and opens nothing.
fn names_a_collection(source: &str) -> Vec<(usize, String)> {
    let code: String = code_only(source).into_iter().collect();
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let opens = line.match_indices(".collection").any(|(at, m)| {
            let rest = line[at + m.len()..].trim_start();
            rest.starts_with("::<")
                || (rest.starts_with('(') && !rest[1..].trim_start().starts_with(')'))
        });
        let constant = line
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|word| word.contains("COLLECTION"));
        if opens || constant {
            found.push((n + 1, lines.get(n).map_or("", |l| l.trim()).to_owned()));
        }
    }
    found
}

#[test]
fn the_checker_of_collection_names_sees_what_it_must() {
    for named in [
        "fn f(s: &Store) { s.db().collection(\"x\"); }",
        "fn f(s: &Store) { s.db()\n    .collection::<Document>(NAME); }",
        "fn f(s: &Store) { s.db().collection (name); }",
        "pub const COLLECTION: &str = \"x\";",
        "const USERS_COLLECTION: &str = \"users\";",
    ] {
        assert!(!names_a_collection(named).is_empty(), "missed: {named}");
    }
    for clean in [
        "fn f(g: Resolution) -> bool { g.collection() == \"x\" }",
        "// s.db().collection(\"x\") in a comment",
        "fn f() -> &'static str { \".collection(COLLECTION)\" }",
    ] {
        assert!(names_a_collection(clean).is_empty(), "flagged: {clean}");
    }
}

#[test]
fn only_storage_names_a_collection() {
    let src = root().join("src");
    let mut found = Vec::new();
    for path in files_under(&src, "rs") {
        let rel = relative(&path, &src);
        if rel.starts_with("storage/") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("readable source");
        for (line, code) in names_a_collection(&source) {
            found.push(format!("src/{rel}:{line}: {code}"));
        }
    }
    assert!(
        found.is_empty(),
        "only storage/ names collections, their indexes and their documents: \
         move this into a storage module and call it:\n{}",
        found.join("\n")
    );
}

// Circles between sibling modules, at every depth: each file or directory
// is a module (`reports::queries`, `web::reports`, `web::reports::exports`),
// and a path in one module's code that reaches a sibling of it or of one of
// its ancestors (`crate::reports::visits`, `super::visits`,
// `crate::web::{fmt, state}`, or a name the parent re-exports from a
// child, as `super::resolve_kept` does through `use view::*`) is an edge
// between the two siblings. A circle means none of its members can be
// read, tested or moved without the others: the shared piece belongs in a
// module below them all. Names a file takes in through its parent's glob
// (`use super::*`) are not followed: only paths written out count.

/// A module path from the crate root: `web/reports/exports.rs` is
/// `[web, reports, exports]`.
type Module = Vec<String>;

/// Every module the files make: each file's own and every directory above it.
fn modules_of(files: &[(String, String)]) -> BTreeSet<Module> {
    let mut found = BTreeSet::new();
    for (relative, _) in files {
        let path = module_path(relative);
        for depth in 1..=path.len() {
            found.insert(path[..depth].to_vec());
        }
    }
    found
}

/// Every path `relative` names from the crate root, whole, with the
/// 1-based line of its last segment: `crate::a::b::c` is `[a, b, c]`,
/// `crate::a::{b, c::D}` both `[a, b]` and `[a, c, D]`, and `super::b` in
/// `a/x.rs` is `[a, b]`.
fn module_uses(relative: &str, source: &str) -> Vec<(Module, usize)> {
    let code = code_only(source);
    let reader = PathReader { code: &code };
    let file_path = module_path(relative);
    let line_at = |at: usize| code[..at].iter().filter(|&&c| c == '\n').count() + 1;

    fn expand(
        reader: &PathReader<'_>,
        at: usize,
        prefix: &[String],
        out: &mut Vec<(Module, usize)>,
    ) {
        let heads = reader.heads(at);
        if heads.is_empty() {
            // `f::<T>()`: the path ends before the generics.
            if !prefix.is_empty() {
                out.push((prefix.to_vec(), at));
            }
            return;
        }
        for (name, start) in heads {
            let mut path = prefix.to_vec();
            path.push(name.clone());
            let after = reader.word(start).map(|(_, end)| end);
            match after.and_then(|end| reader.separator(end)) {
                Some(next) => expand(reader, next, &path, out),
                None => out.push((path, start)),
            }
        }
    }

    let mut found = Vec::new();
    let mut inline_mods: Vec<usize> = Vec::new();
    let mut opens_mod: Option<usize> = None;
    let mut depth = 0;
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c == '{' {
            depth += 1;
            if opens_mod == Some(i) {
                inline_mods.push(depth);
            }
            i += 1;
            continue;
        }
        if c == '}' {
            if inline_mods.last() == Some(&depth) {
                inline_mods.pop();
            }
            depth -= 1;
            i += 1;
            continue;
        }
        let starts_word = i == 0 || !(code[i - 1].is_alphanumeric() || code[i - 1] == '_');
        let Some((word, end)) = starts_word.then(|| reader.word(i)).flatten() else {
            i += 1;
            continue;
        };
        match word.as_str() {
            "mod" => {
                let name = reader.skip_space(end);
                if let Some((_, after)) = reader.word(name) {
                    let brace = reader.skip_space(after);
                    if code.get(brace) == Some(&'{') {
                        opens_mod = Some(brace);
                    }
                }
            }
            "crate" => {
                if let Some(next) = reader.separator(end) {
                    expand(&reader, next, &[], &mut found);
                }
            }
            "super" => {
                let mut climbed = 1;
                let mut next = reader.separator(end);
                while let Some(at) = next {
                    match reader.word(at) {
                        Some((w, after)) if w == "super" => {
                            climbed += 1;
                            next = reader.separator(after);
                            // Read on after the whole chain, not from
                            // its second `super` as a chain of its own.
                            i = after;
                        }
                        _ => break,
                    }
                }
                // The module the code is in: the file's, then one level
                // per inline `mod` (their names never matter here: a
                // path that keeps them is inside the file's own module).
                let here = file_path.len() + inline_mods.len();
                if let (Some(at), true) = (next, climbed <= here) {
                    let mut base: Vec<String> = file_path.clone();
                    base.resize(here, String::new());
                    base.truncate(here - climbed);
                    expand(&reader, at, &base, &mut found);
                }
                i = i.max(end);
                continue;
            }
            _ => {}
        }
        i = end;
    }
    found
        .into_iter()
        .map(|(path, at)| (path, line_at(at)))
        .collect()
}

/// The names each module's own file hands on from its children
/// (`use view::*;`, `pub use exports::{pages_csv, slug};`), each with the
/// child it comes from, so `super::slug` in a sibling is a use of `exports`.
/// A glob hands on the items its child declares public at its top level.
fn handed_on(
    files: &[(String, String)],
    modules: &BTreeSet<Module>,
) -> BTreeMap<Module, BTreeMap<String, Module>> {
    let declared = |module: &Module| -> Vec<String> {
        let Some((_, source)) = files.iter().find(|(r, _)| &module_path(r) == module) else {
            return Vec::new();
        };
        let code: String = code_only(source).into_iter().collect();
        let mut names = Vec::new();
        for line in code.lines().filter(|l| l.starts_with("pub")) {
            let words: Vec<&str> = line
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| !w.is_empty())
                .collect();
            let kinds = [
                "fn", "struct", "enum", "const", "static", "type", "trait", "mod",
            ];
            if let Some(k) = words.iter().position(|w| kinds.contains(w)) {
                if let Some(name) = words.get(k + 1) {
                    names.push((*name).to_owned());
                }
            }
        }
        names
    };
    let mut out: BTreeMap<Module, BTreeMap<String, Module>> = BTreeMap::new();
    for (relative, source) in files {
        let parent = module_path(relative);
        let code = code_only(source);
        let reader = PathReader { code: &code };
        let mut i = 0;
        while i < code.len() {
            let starts_word = i == 0 || !(code[i - 1].is_alphanumeric() || code[i - 1] == '_');
            let Some((word, end)) = starts_word.then(|| reader.word(i)).flatten() else {
                i += 1;
                continue;
            };
            i = end;
            if word != "use" {
                continue;
            }
            let at = reader.skip_space(end);
            let Some((child, after)) = reader.word(at) else {
                continue;
            };
            let mut child_path = parent.clone();
            child_path.push(child);
            let Some(next) = reader
                .separator(after)
                .filter(|_| modules.contains(&child_path))
            else {
                continue;
            };
            let names = out.entry(parent.clone()).or_default();
            for (name, _) in reader.heads(next) {
                if name == "*" {
                    for item in declared(&child_path) {
                        names.insert(item, child_path.clone());
                    }
                } else {
                    names.insert(name, child_path.clone());
                }
            }
        }
    }
    out
}

/// The edges between sibling modules, each with where it was seen.
type Edges = BTreeMap<Module, Vec<(Module, String)>>;

fn module_edges(files: &[(String, String)]) -> Edges {
    let modules = modules_of(files);
    let handed = handed_on(files, &modules);
    let mut edges = Edges::new();
    for (relative, source) in files {
        let from = module_path(relative);
        for (used, line) in module_uses(relative, source) {
            // The module the path names: its longest start that is one.
            let Some(to) = (1..=used.len())
                .rev()
                .map(|n| used[..n].to_vec())
                .find(|m| modules.contains(m))
            else {
                continue;
            };
            let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let sibling = if shared < from.len() && shared < to.len() {
                to[..=shared].to_vec()
            } else if shared == to.len() && shared < from.len() {
                // An ancestor: a name it hands on from one of its children.
                let Some(child) = used
                    .get(to.len())
                    .and_then(|name| handed.get(&to).and_then(|h| h.get(name)))
                else {
                    continue;
                };
                child.clone()
            } else {
                continue;
            };
            let here = from[..=shared].to_vec();
            if sibling != here {
                edges
                    .entry(here)
                    .or_default()
                    .push((sibling, format!("src/{relative}:{line}")));
            }
        }
    }
    edges
}

/// The circles of `edges`: each group of sibling modules that reach each
/// other (a strongly connected component of more than one), its members
/// first, then the edges between them.
fn circles(edges: &Edges) -> Vec<Vec<String>> {
    let nodes: BTreeSet<&Module> = edges
        .iter()
        .flat_map(|(from, to)| std::iter::once(from).chain(to.iter().map(|(t, _)| t)))
        .collect();
    let reach = |start: &Module| {
        let mut seen: BTreeSet<Module> = BTreeSet::new();
        let mut stack = vec![start.clone()];
        while let Some(n) = stack.pop() {
            for (to, _) in edges.get(&n).into_iter().flatten() {
                if seen.insert(to.clone()) {
                    stack.push(to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&Module, BTreeSet<Module>> =
        nodes.iter().map(|n| (*n, reach(n))).collect();
    let mut done: BTreeSet<Module> = BTreeSet::new();
    let mut out = Vec::new();
    for n in &nodes {
        if done.contains(*n) || !reached[n].contains(*n) {
            continue;
        }
        let group: BTreeSet<Module> = reached[n]
            .iter()
            .filter(|m| reached.get(m).is_some_and(|r| r.contains(*n)))
            .cloned()
            .collect();
        let mut lines = vec![format!(
            "members: {}",
            group
                .iter()
                .map(|m| m.join("::"))
                .collect::<Vec<_>>()
                .join(", ")
        )];
        for m in &group {
            for (to, at) in edges.get(m).into_iter().flatten() {
                if group.contains(to) {
                    lines.push(format!("{} -> {} ({at})", m.join("::"), to.join("::")));
                }
            }
        }
        lines.dedup();
        done.extend(group);
        out.push(lines);
    }
    out
}

#[test]
fn no_circle_between_sibling_modules_at_any_depth() {
    let src = root().join("src");
    let files: Vec<(String, String)> = files_under(&src, "rs")
        .into_iter()
        .map(|p| {
            let source = std::fs::read_to_string(&p).expect("readable source");
            (relative(&p, &src), source)
        })
        .filter(|(rel, _)| !ROOTS.contains(&rel.as_str()))
        .collect();
    let found = circles(&module_edges(&files));
    assert!(
        found.is_empty(),
        "{} circle(s) between sibling modules; move the piece they share into a module below them:\n{}",
        found.len(),
        found
            .iter()
            .map(|c| c.join("\n  "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn module_uses_follow_groups_supers_and_inline_paths() {
    let source = "use super::visits::{self, X};\nuse crate::reports::{queries, page_totals::Y};\n\
                  use crate::{storage::sites::Site, domain};\n\
                  mod tests {\n    use super::super::chart;\n    use super::*;\n}\n\
                  fn f() { crate::web::fmt::x::<u8>(); super::Resolution::Hour; }\n";
    let got: Vec<(String, usize)> = module_uses("reports/sources.rs", source)
        .into_iter()
        .map(|(p, line)| (p.join("::"), line))
        .collect();
    assert_eq!(
        got,
        [
            ("reports::visits::self".to_owned(), 1),
            ("reports::visits::X".to_owned(), 1),
            ("reports::queries".to_owned(), 2),
            ("reports::page_totals::Y".to_owned(), 2),
            ("storage::sites::Site".to_owned(), 3),
            ("domain".to_owned(), 3),
            ("reports::chart".to_owned(), 5),
            ("reports::sources::*".to_owned(), 6),
            ("web::fmt::x".to_owned(), 8),
            ("reports::Resolution::Hour".to_owned(), 8),
        ]
    );
}

fn probe(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(r, s)| ((*r).to_owned(), (*s).to_owned()))
        .collect()
}

#[test]
fn a_circle_is_found_through_any_number_of_modules() {
    let files = probe(&[
        ("reports/a.rs", "use super::b::X;\n"),
        ("reports/b.rs", "use crate::reports::c::Y;\n"),
        ("reports/c.rs", "fn f() { super::a::z(); }\n"),
        ("reports/d.rs", "use super::a::X;\n"),
    ]);
    let found = circles(&module_edges(&files));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].len(), 4, "{found:?}");
    assert_eq!(found[0][0], "members: reports::a, reports::b, reports::c");
    assert!(found[0][1].starts_with("reports::a -> reports::b (src/reports/a.rs:1)"));
    // Without the edge back, no circle.
    assert!(circles(&module_edges(&files[..2])).is_empty());
}

#[test]
fn a_circle_is_found_at_any_depth_and_through_what_a_parent_hands_on() {
    // Three levels down, one way through a written path, the other
    // through a name the parent re-exports from its child.
    let files = probe(&[
        ("web/reports/mod.rs", "mod a;\nmod b;\nuse b::*;\n"),
        ("web/reports/a.rs", "fn f() { super::shared(); }\n"),
        (
            "web/reports/b.rs",
            "pub(super) fn shared() {}\nuse crate::web::reports::a::X;\n",
        ),
        ("web/api/c.rs", "use crate::web::reports::a::X;\n"),
    ]);
    let found = circles(&module_edges(&files));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0][0], "members: web::reports::a, web::reports::b");
    // A use from a deeper module counts between the siblings that hold
    // the two ends: web::api -> web::reports, no circle by itself.
    let edges = module_edges(&files);
    assert!(edges[&vec!["web".to_owned(), "api".to_owned()]]
        .iter()
        .any(|(to, _)| to == &vec!["web".to_owned(), "reports".to_owned()]));
}

/// The uses in the files of module `from` (a second-level module such as
/// `web::api`) of module `to`, as "file:line: code".
fn uses_between(files: &[(String, String)], from: [&str; 2], to: [&str; 2]) -> Vec<String> {
    let mut found = Vec::new();
    for (relative, source) in files {
        let path = module_path(relative);
        if path.len() < 2 || path[0] != from[0] || path[1] != from[1] {
            continue;
        }
        let lines: Vec<&str> = source.lines().collect();
        for (used, line) in module_uses(relative, source) {
            if used.len() >= 2 && used[..2] == to {
                let code = lines.get(line - 1).map_or("", |l| l.trim());
                found.push(format!("src/{relative}:{line}: {code}"));
            }
        }
    }
    found
}

#[test]
fn the_api_and_the_report_pages_share_no_code_but_the_reports() {
    let src = root().join("src");
    let files: Vec<(String, String)> = files_under(&src, "rs")
        .into_iter()
        .map(|p| {
            let source = std::fs::read_to_string(&p).expect("readable source");
            (relative(&p, &src), source)
        })
        .collect();
    // What a report is made of is read once, in `reports/`; `web::api`
    // and `web::reports` each only parse a request and render the answer
    // (JSON; HTML and CSV), so neither can change what the other shows.
    let mut found = uses_between(&files, ["web", "api"], ["web", "reports"]);
    found.extend(uses_between(&files, ["web", "reports"], ["web", "api"]));
    assert!(
        found.is_empty(),
        "web::api and web::reports use each other; move what both need into reports/:\n{}",
        found.join("\n")
    );
    // The rule sees each way of naming the other module.
    let probe = [(
        "web/api/x.rs".to_owned(),
        "use crate::web::reports::sources;\nfn f() { super::super::reports::summaries(); }\n\
         use crate::web::{reports::breakdowns, state};\nuse crate::reports::compared;\n"
            .to_owned(),
    )];
    assert_eq!(
        uses_between(&probe, ["web", "api"], ["web", "reports"]).len(),
        3
    );
}

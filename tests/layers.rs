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

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom to top. A module may use the modules of the layers below its own,
/// never one above it, nor another module of its own layer (those are
/// independent of each other).
const LAYERS: &[&[&str]] = &[
    // Knows nothing of the product's flow: values parsed once, the clock,
    // metric primitives, logging, the HEAD mark, the User-Agent and
    // country classifiers.
    &[
        "domain",
        "clock",
        "metrics",
        "telemetry",
        "head",
        "classify",
    ],
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
    &["startup"],
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
            "use super::super::super::startup::X;\nuse super::super::error::E;\n"
        ),
        [("startup".to_owned(), 1)]
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
        "use crate::storage::Store;\nuse crate::accounts::User;\nuse crate::{journal, head};\n"
    )
    .is_empty());
    assert!(reached(
        "cli.rs",
        "use crate::startup::Application;\nuse crate::web::snippets;\n"
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

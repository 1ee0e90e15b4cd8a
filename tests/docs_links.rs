//! Every relative link in README.md and docs/**/*.md points at a file that exists, and every
//! `#anchor` into a markdown file names one of its headings (GitHub's heading ids). Links to
//! other sites (`http:`, `https:`, `mailto:`) are not followed. Links inside code blocks and
//! code spans are not links.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The markdown files this test keeps honest: README.md and everything under docs/, but for
/// docs/_incoming/ (notes from other branches, waiting to be folded into the pages).
fn documentation(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path != root.join("docs/_incoming") {
                    dirs.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines of `text` outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut fence: Option<&str> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => lines.push(line),
            _ => {}
        }
    }
    lines
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            out.push(c);
        }
    }
    out
}

/// The targets of inline links and images (`[text](target)`, `![alt](target "title")`) and of
/// reference definitions (`[label]: target`).
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose_lines(text) {
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let inner = after[..end].trim();
            let target = inner.split_whitespace().next().unwrap_or("");
            targets.push(target.trim_matches(['<', '>']).to_string());
            rest = &after[end..];
        }
        let t = line.trim_start();
        if let (true, Some(i)) = (t.starts_with('['), t.find("]: ")) {
            if let Some(target) = t[i + 3..].split_whitespace().next() {
                targets.push(target.trim_matches(['<', '>']).to_string());
            }
        }
    }
    targets
}

/// GitHub's id of a heading: lower case, punctuation dropped (letters, digits, `-`, `_` and
/// spaces kept, the text of code spans too), spaces as `-`; a repeated id gets `-1`, `-2`, ...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose_lines(text) {
        let t = line.trim_start();
        let level = t.chars().take_while(|&c| c == '#').count();
        if level == 0 || level > 6 || !t[level..].starts_with(' ') {
            continue;
        }
        let slug: String = t[level..]
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut id = slug.clone();
        let mut n = 0;
        while seen.contains(&id) {
            n += 1;
            id = format!("{slug}-{n}");
        }
        seen.insert(id);
    }
    seen
}

/// Every broken link of the documentation under `root`, as `file: target (why)`.
fn broken_links(root: &Path) -> Vec<String> {
    let mut broken = Vec::new();
    for file in documentation(root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for target in link_targets(&text) {
            if target.is_empty() {
                broken.push(format!("{shown}: an empty link"));
                continue;
            }
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s))
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else if path.starts_with('/') {
                broken.push(format!(
                    "{shown}: {target} (an absolute path; use a relative one)"
                ));
                continue;
            } else {
                file.parent().unwrap().join(path)
            };
            if !dest.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                if dest.extension().is_some_and(|e| e == "md") {
                    let text = std::fs::read_to_string(&dest).unwrap();
                    if !anchors(&text).contains(anchor) {
                        broken.push(format!("{shown}: {target} (no heading with that id)"));
                    }
                }
            }
        }
    }
    broken
}

#[test]
fn every_link_in_the_readme_and_docs_points_at_something_that_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let broken = broken_links(root);
    assert!(
        broken.is_empty(),
        "broken links in the documentation:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn the_checker_finds_a_missing_file_a_missing_heading_and_ignores_code() {
    let root = std::env::temp_dir().join(format!("callbackd-docs-links-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(
        root.join("README.md"),
        "# Title\n\nSee [a](docs/a.md#the-part-two), [gone](docs/gone.md), \
         [here](#title), [there](docs/a.md#nowhere) and [web](https://example.com/x).\n\
         `[code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# A\n\n## The part: two\n\n## `[api]`\n\n![img](missing.png) [ok](#api)\n",
    )
    .unwrap();
    let broken = broken_links(&root);
    std::fs::remove_dir_all(&root).unwrap();
    assert_eq!(
        broken,
        vec![
            "README.md: docs/gone.md (no such file)",
            "README.md: docs/a.md#nowhere (no heading with that id)",
            "docs/a.md: missing.png (no such file)",
        ],
    );
}

/// The README's command table names every subcommand `callbackd --help` lists, so that a new
/// command cannot be left out of the front page.
#[test]
fn the_readme_lists_every_command() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_callbackd"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    assert!(commands.len() > 10, "no commands parsed from:\n{help}");
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let table = readme
        .split("\n## Commands\n")
        .nth(1)
        .expect("README.md has a ## Commands section");
    let table = table.split("\n## ").next().unwrap();
    let missing: Vec<&str> = commands
        .into_iter()
        .filter(|c| !table.contains(&format!("`{c}`")) && !table.contains(&format!("`{c} ")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's ## Commands leaves out: {missing:?}"
    );
}

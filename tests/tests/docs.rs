//! The guide (`docs/src`, an mdBook) and the README checked as a reader would use them: every
//! internal link leads to a page and heading that exist, every page is in the book's summary,
//! every spec shown passes `xcsp validate` (and one shown as wrong fails with the code the page
//! names), every fragment of a spec is HCL, and every generated reference is what its generator
//! makes now (`XCSP_BLESS=1` rewrites them). The book's build is `scripts/docs`, in CI.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use xcsp_tests::{bin, root};

/// The Markdown a reader is sent to: the README and every page of the book.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "md") {
                out.push(p);
            }
        }
    }
    let mut out = vec![root().join("README.md")];
    walk(&root().join("docs/src"), &mut out);
    out.sort();
    out
}

/// A page's text outside fenced code, with inline code spans blanked.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut in_code = false;
        for ch in line.chars() {
            if ch == '`' {
                in_code = !in_code;
                continue;
            }
            out.push(if in_code { ' ' } else { ch });
        }
        out.push('\n');
    }
    out
}

/// The ids of a page's headings, as mdBook (and GitHub) make them: lower case, letters, digits,
/// `_` and `-` kept, white space made `-`, the rest dropped.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let id: String = title
            .chars()
            .filter_map(|c| {
                if c.is_alphanumeric() || c == '_' || c == '-' {
                    Some(c.to_ascii_lowercase())
                } else if c.is_whitespace() {
                    Some('-')
                } else {
                    None
                }
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 1;
        while out.contains(&unique) {
            unique = format!("{id}-{n}");
            n += 1;
        }
        out.insert(unique);
    }
    out
}

/// Every `](target)` of a page's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].trim().to_string());
        }
    }
    out
}

#[test]
fn every_internal_link_leads_to_a_page_and_heading_that_exist() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.starts_with("http://") || link.starts_with("https://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').map_or((link.as_str(), None), |(f, a)| (f, Some(a)));
            let target = if file.is_empty() { page.clone() } else { page.parent().unwrap().join(file) };
            if !target.exists() {
                broken.push(format!("{}: {link}: no {}", page.display(), target.display()));
                continue;
            }
            if let Some(a) = anchor {
                let found = anchors(&std::fs::read_to_string(&target).unwrap_or_default());
                if !found.contains(a) {
                    broken.push(format!("{}: {link}: no heading #{a} in {}", page.display(), target.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_the_guide_is_in_its_summary() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).iter().map(|l| src.join(l)).collect();
    for page in pages().into_iter().filter(|p| p.starts_with(&src) && !p.ends_with("SUMMARY.md")) {
        assert!(listed.contains(&page), "{} is in no chapter of SUMMARY.md", page.display());
    }
    assert!(listed.len() >= 20, "the summary lists the guide's pages: {listed:?}");
}

/// The fenced HCL blocks of a page: (info string, text, line).
fn hcl_blocks(text: &str) -> Vec<(String, String, usize)> {
    let mut out = Vec::new();
    let mut current: Option<(String, String, usize)> = None;
    for (n, line) in text.lines().enumerate() {
        match (&mut current, line.trim_start().strip_prefix("```")) {
            (None, Some(info)) if info.starts_with("hcl") => current = Some((info.to_string(), String::new(), n + 1)),
            (Some(_), Some(_)) => out.push(current.take().unwrap()),
            (Some((_, body, _)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// A whole spec shown in the docs is one a reader can start from: `xcsp validate` accepts it.
/// One marked `hcl,refused=CODE` shows a mistake: validate refuses it with that code. One marked
/// `hcl,fragment` is part of a spec: it parses as HCL.
#[test]
fn every_spec_shown_passes_validate_and_every_wrong_one_fails_with_its_code() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for page in pages() {
        for (info, body, line) in hcl_blocks(&std::fs::read_to_string(&page).unwrap()) {
            let at = format!("{}:{line}", page.display());
            if info.split(',').any(|w| w == "fragment") {
                if let Err(e) = hcl_edit::parser::parse_body(&body) {
                    failures.push(format!("{at}: the fragment is not HCL: {e}"));
                }
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("spec.xcsp.hcl"), &body).unwrap();
            let out = Command::new(bin("xcsp")).arg("validate").arg(dir.path()).output().unwrap();
            let said = String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
            match info.split(',').find_map(|w| w.strip_prefix("refused=")) {
                None if !out.status.success() => failures.push(format!("{at}: validate refuses it:\n{said}")),
                Some(code) if out.status.success() || !said.contains(code) => {
                    failures.push(format!("{at}: shown as refused with {code}, validate said:\n{said}"))
                }
                _ => {}
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked >= 3, "the README's and the first pool's specs, and a refused one: {checked}");
}

/// The checks above see what they check: a link in code is no link, a heading's id is mdBook's.
#[test]
fn the_checks_read_links_and_headings_as_mdbook_does() {
    let page = "# Commands in detail\n\n## `xcsp validate`\n\n## `xcsp validate`\n\nsee [x](a.md#b) and `[y](not-a-link.md)`\n\n```\n[z](fenced.md)\n```\n";
    assert_eq!(links(page), ["a.md#b"]);
    let ids = anchors(page);
    assert!(
        ids.contains("commands-in-detail") && ids.contains("xcsp-validate") && ids.contains("xcsp-validate-1"),
        "{ids:?}"
    );
    let blocks = hcl_blocks("text\n```hcl,refused=xcsp::cidr::syntax\na = 1\n```\n");
    assert_eq!(blocks, [("hcl,refused=xcsp::cidr::syntax".to_string(), "a = 1\n".to_string(), 2)]);
}

/// The references made from the code are what the code makes now: the spec reference from the
/// decoder's schema, the diagnostics from the table of codes, the command line from the binary's
/// clap definitions (its hidden `xcsp reference`). `XCSP_BLESS=1` rewrites the stale ones.
#[test]
fn the_generated_references_are_current() {
    let cli = Command::new(bin("xcsp")).arg("reference").output().unwrap();
    assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
    let pages = [
        ("docs/src/reference/spec-schema.md", xcsp_plans::schema::reference()),
        ("docs/src/reference/diagnostics.md", xcsp_core::codes::reference()),
        ("docs/src/reference/cli.md", String::from_utf8(cli.stdout).unwrap()),
    ];
    let bless = std::env::var_os("XCSP_BLESS").is_some();
    let mut stale = Vec::new();
    for (page, wanted) in pages {
        let path = root().join(page);
        if bless {
            std::fs::write(&path, &wanted).unwrap();
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != wanted {
            stale.push(page);
        }
    }
    assert!(
        stale.is_empty(),
        "stale: {stale:?}; regenerate with `XCSP_BLESS=1 cargo test --workspace --test docs -- the_generated_references_are_current`"
    );
}

//! What users read about the command line, kept true: the catalog's schema lines, the
//! user guide's help block and tables (`docs/guide.md`), the man page and completions, the
//! environment tables.

use super::*;

#[test]
fn every_catalog_shape_points_at_the_schema_and_says_when_to_use_it() {
    let guide = std::fs::read_to_string(crate::common::root().join("docs/guide.md")).unwrap();
    for entry in std::fs::read_dir(crate::common::root().join("shapes")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(binder_plan::shape::SCHEMA_URL_COMMENT),
            "{}",
            path.display()
        );
        let comment = lines.next().unwrap_or_default();
        assert!(
            comment.starts_with("# ") && comment.len() > 20,
            "{}: one-line use comment",
            path.display()
        );
        binder_host::shape_file(&path).expect("catalog shape parses");
        // The guide's catalog table carries the same line, so the two never drift.
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let row = format!("| [{name}](../shapes/{name}) | {} |", &comment[2..]);
        assert!(
            guide.contains(&row),
            "the guide's catalog table lacks:\n{row}"
        );
    }
}

#[test]
fn guide_help_block_is_current() {
    let readme = std::fs::read_to_string(crate::common::root().join("docs/guide.md")).unwrap();
    let start = readme
        .find("<!-- help start -->\n```text\n")
        .expect("help start marker");
    let block = &readme[start..];
    let body = &block[block.find("```text\n").unwrap() + 8
        ..block
            .find("```\n<!-- help end -->")
            .expect("help end marker")];
    assert_eq!(
        body,
        stdout(&["--help"]),
        "docs/guide.md's help block is stale: paste `binder --help` between the markers"
    );
}

/// The man page and completion scripts are generated from the clap definition and
/// committed; regenerate them after changing a flag (the message says how).
#[test]
fn man_page_and_completions_are_current() {
    for (what, file) in [
        ("man", "docs/man/binder.1"),
        ("man-shape", "docs/man/binder-shape.5"),
        ("complete-bash", "completions/binder.bash"),
        ("complete-zsh", "completions/_binder"),
        ("complete-fish", "completions/binder.fish"),
    ] {
        let out = run(binder().args(["generate", what]), SUCCESS);
        let committed = std::fs::read(crate::common::root().join(file)).unwrap();
        assert!(
            out.stdout == committed,
            "{file} is stale: run `cargo build && target/debug/binder generate {what} > {file}`"
        );
        assert!(!out.stdout.is_empty());
        // ASCII only: groff under the C locale a fresh machine has prints a `§` as
        // `<section>` (#65), and other non-ASCII characters likewise.
        if what.starts_with("man") {
            assert!(out.stdout.is_ascii(), "{file} holds non-ASCII text");
        }
    }
}

/// The guide's block between `<!-- NAME start -->` and `<!-- NAME end -->`.
fn readme_block(readme: &str, name: &str) -> String {
    let start = format!("<!-- {name} start -->\n");
    let end = format!("<!-- {name} end -->");
    let a = readme.find(&start).expect("start marker") + start.len();
    let b = readme[a..].find(&end).expect("end marker") + a;
    readme[a..b].to_string()
}

#[test]
fn guide_environment_and_files_tables_are_the_man_pages() {
    use binder::manual::{readme_table, ENVIRONMENT, FILES, TASK_ENVIRONMENT};
    let readme = std::fs::read_to_string(crate::common::root().join("docs/guide.md")).unwrap();
    for (name, header, table) in [
        (
            "environment",
            ("variable", "binder reads it for"),
            ENVIRONMENT,
        ),
        ("task-environment", ("variable", "value"), TASK_ENVIRONMENT),
        ("files", ("file", "what it is"), FILES),
    ] {
        let want = readme_table(header, table);
        assert_eq!(
            readme_block(&readme, name),
            want,
            "docs/guide.md's {name} table is not binder::manual's; paste:\n{want}"
        );
    }
    // The exit codes: the same rows as the man page's EXIT STATUS.
    let want = binder::manual::readme_exit_table();
    assert_eq!(
        readme_block(&readme, "exit-status"),
        want,
        "docs/guide.md's exit codes are not binder::manual::EXIT_STATUS; paste:\n{want}"
    );
    let man = std::fs::read_to_string(crate::common::root().join("docs/man/binder.1")).unwrap();
    for section in [
        "ENVIRONMENT",
        "FILES",
        "EXIT STATUS",
        "EXAMPLES",
        "SUBCOMMANDS",
    ] {
        assert!(
            man.contains(&format!(".SH \"{section}\""))
                || man.contains(&format!(".SH {section}\n")),
            "man page lacks {section}"
        );
    }
    assert!(
        !man.contains("binder\\-explain(1)"),
        "the man page points at unshipped pages"
    );
}

/// The variables a task gets for its GPUs are each vendor's row of
/// `binder_core::vendor::VENDORS`: the manual's task table names every one, with its
/// fixed value where the row has one.
#[test]
fn the_task_table_holds_every_vendors_variables() {
    use binder::manual::TASK_ENVIRONMENT;
    for row in &binder_core::vendor::VENDORS {
        for (name, value) in row.task_vars {
            let entry = TASK_ENVIRONMENT
                .iter()
                .find(|e| e.names.contains(name))
                .unwrap_or_else(|| {
                    panic!("{name} ({}) is not in the manual's task table", row.name)
                });
            if let Some(value) = value {
                assert!(
                    entry.what.contains(&format!("`{value}`")),
                    "{name}: {}",
                    entry.what
                );
            }
        }
    }
}

/// Every `BINDER_*` name in binder's sources is in the manual's tables, and every
/// launcher variable the ENVIRONMENT table names is one binder-core really reads.
#[test]
fn the_environment_tables_cover_what_the_code_reads() {
    use binder::manual::{ENVIRONMENT, TASK_ENVIRONMENT};
    let documented: Vec<&str> = ENVIRONMENT
        .iter()
        .chain(TASK_ENVIRONMENT)
        .flat_map(|e| e.names.iter().copied())
        .collect();
    let root = crate::common::root();
    let mut sources = String::new();
    let mut core = String::new();
    let mut stack = vec![root.join("src"), root.join("crates")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                if path
                    .file_name()
                    .is_some_and(|n| n != "tests" && n != "target")
                {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs")
                && !path.ends_with("src/manual.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                if path.starts_with(root.join("crates/binder-core/src")) {
                    core.push_str(&text);
                }
                sources.push_str(&text);
            }
        }
    }
    let mut missing = std::collections::BTreeSet::new();
    // Every string literal `"BINDER_…"` (a name, not a prefix such as `"BINDER_"`).
    for (at, _) in sources.match_indices("\"BINDER_") {
        let name: String = sources[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect();
        let closed = sources[at + 1 + name.len()..].starts_with('"');
        if closed && name.len() > "BINDER_".len() && !documented.contains(&name.as_str()) {
            missing.insert(name);
        }
    }
    assert!(
        missing.is_empty(),
        "binder reads or sets {missing:?}, which binder::manual does not document"
    );
    for entry in ENVIRONMENT {
        for name in entry
            .names
            .iter()
            .filter(|n| !n.starts_with("BINDER_") && !n.starts_with("HWLOC_") && **n != "NO_COLOR")
        {
            assert!(
                sources.contains(&format!("\"{name}\"")),
                "the manual documents {name}, which no source reads"
            );
        }
    }
    assert!(
        core.contains("\"SLURM_LOCALID\""),
        "binder-core reads the launchers' variables"
    );
}

/// binder-shape(5) documents every key and value the shape format takes: each property
/// of the schema's objects, and each value of its value lists, appears in bold on the
/// page (it is made from the schema, so a new key cannot be left out).
#[test]
fn the_shape_page_names_every_key_and_value() {
    let page =
        String::from_utf8(run(binder().args(["generate", "man-shape"]), SUCCESS).stdout).unwrap();
    let schema: serde_json::Value =
        serde_json::from_str(&binder_plan::shape::schema_json()).unwrap();
    let mut names: Vec<String> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    for def in schema["$defs"].as_object().unwrap().values() {
        for key in def["properties"]
            .as_object()
            .into_iter()
            .flat_map(|p| p.keys())
        {
            names.push(key.clone());
        }
        for value in def["enum"].as_array().into_iter().flatten() {
            names.push(value.as_str().unwrap().to_owned());
        }
    }
    assert!(names.len() > 60, "{names:?}");
    for name in names {
        // roff writes a hyphen as `\-`.
        let bold = format!("\\fB{}\\fR", name.replace('-', "\\-"));
        assert!(page.contains(&bold), "binder-shape(5) lacks `{name}`");
    }
}

/// #56: the guide's JSON sample is what binder prints (it had lost `gpu_ids`): the first
/// rank of `cores-scatter` for 4 tasks on `pack:2 numa:2 core:4 pu:2`.
#[test]
fn the_guides_json_sample_is_current() {
    let guide = std::fs::read_to_string(crate::common::root().join("docs/guide.md")).unwrap();
    let at = guide
        .find("`--format json` prints one JSON object per rank per line")
        .expect("the dry-run section");
    let block = &guide[at..];
    let start = block.find("```json\n").expect("the sample") + "```json\n".len();
    let sample = block[start..].lines().next().unwrap();
    let out = run(
        binder().args([
            "--dry-run",
            "--format",
            "json",
            "--synthetic",
            "pack:2 numa:2 core:4 pu:2",
            "--local-size",
            "4",
            "shapes/cores-scatter.yaml",
        ]),
        SUCCESS,
    );
    let first = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        sample,
        first.lines().next().unwrap(),
        "paste the first line into the guide"
    );
}

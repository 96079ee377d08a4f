//! docs/reconciliation.md says nothing it cannot show: every `steady …` command in its
//! shell blocks runs as written and succeeds, and every test it names exists.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn doc() -> String {
    std::fs::read_to_string(repo().join("docs/reconciliation.md")).expect("docs/reconciliation.md")
}

/// Lines of ```sh blocks.
fn shell_commands(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_shell = false;
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_shell = !in_shell && line.trim() == "```sh";
            continue;
        }
        if in_shell && !line.trim().is_empty() {
            commands.push(line.trim().to_string());
        }
    }
    commands
}

#[test]
fn every_command_in_the_doc_runs_as_written() {
    let commands = shell_commands(&doc());
    assert!(!commands.is_empty());
    for command in commands {
        let mut words = command.split_whitespace();
        assert_eq!(
            words.next(),
            Some("steady"),
            "the doc shows only steady commands: {command}"
        );
        let output = Command::new(env!("CARGO_BIN_EXE_steady"))
            .args(words)
            .output()
            .expect("run");
        assert!(
            output.status.success(),
            "`{command}` failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// Every `snake_case_test_name` the doc cites is a test function in the repository.
#[test]
fn every_test_the_doc_names_exists() {
    let doc = doc();
    let cited: Vec<&str> = doc
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            s.matches('_').count() >= 4
                && s.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit())
        })
        .collect();
    assert!(cited.len() >= 8, "the doc cites its evidence: {cited:?}");
    let mut sources = String::new();
    for crate_dir in std::fs::read_dir(repo().join("crates")).expect("crates") {
        let tests = crate_dir.expect("entry").path().join("tests");
        let Ok(files) = std::fs::read_dir(&tests) else {
            continue;
        };
        for file in files.flatten() {
            if file.path().extension().is_some_and(|e| e == "rs") {
                sources.push_str(&std::fs::read_to_string(file.path()).unwrap_or_default());
            }
        }
    }
    for name in cited {
        assert!(
            sources.contains(&format!("fn {name}(")),
            "the doc cites `{name}`, which is not a test"
        );
    }
}

//! The JSON documents the binary prints, checked against their published JSON Schemas
//! (`docs/schema/*.schema.json`, draft 2020-12) by a real validator: python3's `jsonschema`
//! (`tests/support/validate_schema.py`), which scripts/setup makes sure is installed.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use netlab::harness::Run;

/// `docs/schema/`, from the test crate's directory.
fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema")
}

/// Panics, showing the validator's errors and the run, unless `run`'s stdout is one JSON
/// document valid against `docs/schema/<schema>.schema.json`.
#[track_caller]
pub fn assert_valid(schema: &str, run: &Run) {
    if let Err(e) = validate(schema, &run.stdout) {
        panic!("{e}\n{run}");
    }
}

#[allow(dead_code)] // used by the test binaries that include this file (learner, generated_docs)
/// Panics with the validator's errors unless `doc` is valid against
/// `docs/schema/<schema>.schema.json`.
#[track_caller]
pub fn assert_document(schema: &str, doc: &str) {
    if let Err(e) = validate(schema, doc) {
        panic!("{e}\n{doc}");
    }
}

fn validate(schema: &str, doc: &str) -> Result<(), String> {
    let path = schema_dir().join(format!("{schema}.schema.json"));
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/validate_schema.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs the schema validator");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(doc.as_bytes())
        .expect("write the document");
    let out = child.wait_with_output().expect("validator ran");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "the document does not match {}:\n{}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

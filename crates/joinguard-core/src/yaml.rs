//! The one module that knows the YAML crate (serde-saphyr). Everything else parses and writes
//! YAML through these functions, so the crate can be replaced here alone; `tests/layering.rs`
//! holds every other core file to that.
//!
//! The options are chosen to read what kubeadm and Cluster API write the way joinguard read it
//! with serde_yaml before (YAML 1.2 booleans: `yes` stays a string; duplicate keys an error), and
//! so that an error never quotes the input: a config or kubeconfig may hold a token or a key, so
//! an error names the line and column, never a snippet of the text.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// A YAML document that could not be read, or a value that could not be written as YAML. Its
/// message names the problem and where (line and column); it never quotes the input.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct YamlError(String);

fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        strict_booleans: true,
        with_snippet: false,
        crop_radius: 0,
    }
}

fn error(e: impl std::fmt::Display) -> YamlError {
    // The crate's own advice is for programmers, not for someone editing a config file.
    let text = e
        .to_string()
        .replace(", set DuplicateKeyPolicy in Options if acceptable", "");
    YamlError(text)
}

/// Parses one YAML document into `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str_with_options(text, options()).map_err(error)
}

/// Parses one YAML document from bytes (UTF-8) into `T`.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, YamlError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| YamlError(format!("not UTF-8 text (at byte {})", e.valid_up_to())))?;
    from_str(text)
}

/// Splits `text` at `---` and parses every document into `T`; empty documents are skipped.
pub fn documents<T: DeserializeOwned>(text: &str) -> Result<Vec<T>, YamlError> {
    serde_saphyr::from_multiple_with_options(text, options()).map_err(error)
}

/// Writes `value` as one YAML document.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(error)
}

/// `"; line N: quote the IPv6 endpoint, ..."` for the first unquoted bracketed endpoint in
/// `text` (`key: [fd00::5]:6443`, or in a flow mapping `{endpoint: [fd00::5]:2380}`), which YAML
/// reads as the start of a list and so cannot parse (kubernetes/kubeadm #3101). To append to a
/// parse error's message; `None` when no such value is there. It quotes only the address, never
/// other input.
pub fn unquoted_ipv6_hint(text: &str) -> Option<String> {
    let (line, value) = text.lines().enumerate().find_map(|(i, l)| {
        l.match_indices('[').find_map(|(at, _)| {
            // A value starts after `key:` or `- ` (with spaces), or after `{`/`,` in a flow map.
            let before = l[..at].trim_end();
            if !(before.ends_with(':') || before.ends_with('-') || before.ends_with(',')) {
                return None;
            }
            let rest = &l[at + 1..];
            let (inside, after) = rest.split_once("]:")?;
            let port: String = after.chars().take_while(char::is_ascii_digit).collect();
            (inside.parse::<std::net::Ipv6Addr>().is_ok() && port.parse::<u16>().is_ok())
                .then(|| (i + 1, format!("[{inside}]:{port}")))
        })
    })?;
    Some(format!(
        "; line {line}: quote the IPv6 endpoint, `\"{value}\"` (unquoted, YAML reads `[...]` as \
         a list: kubernetes/kubeadm #3101)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_place_and_never_quotes_the_input() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct User {
            token: String,
        }
        let e = from_str::<User>("token: s3cr3t.t0k3n\nnot-a-field: s3cr3t.t0k3n\n").unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("not-a-field"), "{msg}");
        assert!(msg.contains("line 2"), "{msg}");
        assert!(!msg.contains("s3cr3t"), "{msg}");
    }

    #[test]
    fn an_unquoted_bracketed_endpoint_is_named_in_block_and_flow_style() {
        for (text, line, value) in [
            ("a: 1\nendpoint: [fd00::5]:6443\n", 2, "[fd00::5]:6443"),
            (
                "targets:\n  - {kind: etcd-peer, endpoint: [fd00:198:18::3]:2380}\n",
                2,
                "[fd00:198:18::3]:2380",
            ),
            ("eps:\n  - [::1]:2379\n", 2, "[::1]:2379"),
        ] {
            let hint = unquoted_ipv6_hint(text).unwrap_or_else(|| panic!("{text}"));
            assert!(
                hint.contains(&format!(
                    "line {line}: quote the IPv6 endpoint, `\"{value}\"`"
                )),
                "{hint}"
            );
        }
        for text in [
            "endpoint: \"[fd00::5]:6443\"\n",
            "list: [a, b]\n",
            "x: [1]:2\n",
            "eps: [\"[fd00::5]:2379\"]\n",
        ] {
            assert_eq!(unquoted_ipv6_hint(text), None, "{text}");
        }
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let v: serde_json::Value = from_str("a: yes\nb: true\nc: 'x'\n").unwrap();
        assert_eq!(v["a"], "yes");
        assert_eq!(v["b"], true);
    }

    #[test]
    fn duplicate_keys_are_an_error() {
        let e = from_str::<serde_json::Value>("a: 1\na: 2\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "duplicate mapping key: a at line 2, column 1"
        );
    }

    #[test]
    fn several_documents_and_a_round_trip() {
        let docs: Vec<serde_json::Value> = documents("a: 1\n---\n---\nb: [x, y]\n").unwrap();
        assert_eq!(docs.len(), 2, "{docs:?}");
        let text = to_string(&docs[1]).unwrap();
        assert_eq!(from_str::<serde_json::Value>(&text).unwrap(), docs[1]);
    }
}

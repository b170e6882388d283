//! Checks API responses against docs/openapi.json, the document the app
//! serves: each response must be documented for its operation and status,
//! and validate against that schema (formats included).

use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock};

pub fn document() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let text = std::fs::read_to_string(crate::helpers::repo_root().join("docs/openapi.json"))
            .expect("docs/openapi.json");
        serde_json::from_str(&text).expect("docs/openapi.json is JSON")
    })
}

/// The documented path template a request path falls under.
pub fn template_of(path: &str) -> Option<String> {
    let path = path.split('?').next().unwrap();
    let segments: Vec<&str> = path.split('/').collect();
    document()["paths"]
        .as_object()
        .unwrap()
        .keys()
        .find(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == segments.len()
                && parts
                    .iter()
                    .zip(&segments)
                    .all(|(t, s)| t.starts_with('{') || t == s)
        })
        .cloned()
}

fn escape(pointer_part: &str) -> String {
    pointer_part.replace('~', "~0").replace('/', "~1")
}

/// Validates `body` against the schema at `pointer` in the document.
pub fn check_against(pointer: &str, body: &Value) -> Result<(), String> {
    let mut schema = document().clone();
    schema.as_object_mut().unwrap().insert(
        "$ref".into(),
        Value::String(format!(
            "#{}",
            pointer.replace('{', "%7B").replace('}', "%7D")
        )),
    );
    let validator = jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| format!("schema at {pointer}: {e}"))?;
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

/// Which (template, method, status) answers the tests have checked.
pub fn seen() -> &'static Mutex<BTreeSet<(String, String, u16)>> {
    static SEEN: OnceLock<Mutex<BTreeSet<(String, String, u16)>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

/// Checks one real answer: documented for its operation and status, JSON,
/// and valid. Answers outside the documented paths must be the `Error`
/// schema.
pub fn check(method: &str, path: &str, status: u16, content_type: &str, body: &str) {
    assert!(
        content_type.starts_with("application/json"),
        "{method} {path} → {status} is {content_type}, not JSON"
    );
    let body: Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("{method} {path} → {status}: not JSON ({e}): {body}"));
    let Some(template) = template_of(path) else {
        check_against("/components/schemas/Error", &body)
            .unwrap_or_else(|e| panic!("{method} {path} → {status}: {e}"));
        return;
    };
    let method = method.to_lowercase();
    let operation = format!("/paths/{}/{}", escape(&template), method);
    let documented_method = document().pointer(&operation).is_some();
    // Another method on a documented path is answered 405, which the GET
    // operation documents.
    let (method, operation) = if documented_method {
        (method, operation)
    } else {
        assert_eq!(status, 405, "{method} {path} is not documented");
        (
            "get".to_owned(),
            format!("/paths/{}/get", escape(&template)),
        )
    };
    let response = format!("{operation}/responses/{status}");
    let documented = document().pointer(&response).unwrap_or_else(|| {
        panic!("{method} {path} answered {status}, which {response} does not document")
    });
    // Shared answers live under components/responses.
    let response = match documented["$ref"].as_str() {
        Some(reference) => reference.trim_start_matches('#').to_owned(),
        None => response,
    };
    check_against(
        &format!("{response}/content/{}/schema", escape("application/json")),
        &body,
    )
    .unwrap_or_else(|e| {
        panic!("{method} {path} → {status} does not match the document: {e}\n{body}")
    });
    seen().lock().unwrap().insert((template, method, status));
}

/// Every documented (path, method, status), but 503: that one needs the
/// database away (tests/api/security.rs covers outages).
pub fn documented() -> BTreeSet<(String, String, u16)> {
    let mut all = BTreeSet::new();
    for (template, item) in document()["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            for status in operation["responses"].as_object().unwrap().keys() {
                let status: u16 = status.parse().unwrap();
                if status != 503 {
                    all.insert((template.clone(), method.clone(), status));
                }
            }
        }
    }
    all
}

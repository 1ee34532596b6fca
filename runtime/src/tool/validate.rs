//! Checks a call's arguments against its tool's schema before the tool runs.
//!
//! This covers the part of JSON Schema troupe's derived schemas use at the top
//! level — required keys, unknown keys under `additionalProperties: false`,
//! each property's type and `enum` — so a wrong call gets one clear message
//! naming every problem, whatever tool it was for. Deeper checks are left to
//! the tool's own deserialization, which reports its own errors.

use serde_json::Value;

use super::ArgumentAlias;

/// Renames each alias in `args` to the argument it stands for; an alias
/// given with its argument is an error naming both.
pub fn resolve_aliases(aliases: &[ArgumentAlias], mut args: Value) -> Result<Value, String> {
    let Some(obj) = args.as_object_mut() else {
        return Ok(args);
    };
    for ArgumentAlias { alias, argument } in aliases {
        let Some(value) = obj.remove(alias) else {
            continue;
        };
        if obj.contains_key(argument) {
            return Err(format!(
                "`{alias}` is another name for `{argument}`: give one of them, not both"
            ));
        }
        obj.insert(argument.clone(), value);
    }
    Ok(args)
}

/// Checks `args` against `schema`; `Err` lists every problem found.
pub fn check(schema: &Value, args: &Value) -> Result<(), Vec<String>> {
    let Some(obj) = args.as_object() else {
        return Err(vec![format!(
            "arguments must be a JSON object, not {}",
            kind_of(args)
        )]);
    };
    let mut problems = Vec::new();
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for key in required.iter().filter_map(Value::as_str) {
            if !obj.contains_key(key) {
                problems.push(format!("missing required argument `{key}`"));
            }
        }
    }
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (key, value) in obj {
        match props.and_then(|p| p.get(key)) {
            Some(prop) => check_value(key, prop, value, &mut problems),
            None if closed => {
                let known: Vec<&str> = props
                    .map(|p| p.keys().map(String::as_str).collect())
                    .unwrap_or_default();
                problems.push(format!(
                    "unknown argument `{key}` (accepted: {})",
                    known.join(", ")
                ));
            }
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

fn check_value(key: &str, prop: &Value, value: &Value, problems: &mut Vec<String>) {
    let types: Vec<&str> = match prop.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.is_empty() && !types.iter().any(|t| matches_type(t, value)) {
        problems.push(format!(
            "`{key}` must be {}, not {}",
            types.join(" or "),
            kind_of(value)
        ));
        return;
    }
    if let Some(allowed) = prop.get("enum").and_then(Value::as_array) {
        if !value.is_null() && !allowed.contains(value) {
            let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
            problems.push(format!(
                "`{key}` must be one of {}, not {value}",
                list.join(", ")
            ));
        }
    }
}

fn matches_type(t: &str, value: &Value) -> bool {
    match t {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["path"],
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": ["integer", "null"]},
                "mode": {"type": "string", "enum": ["a", "b"]}
            }
        })
    }

    #[test]
    fn a_good_call_passes() {
        assert_eq!(
            check(&schema(), &json!({"path": "x", "limit": 3, "mode": "a"})),
            Ok(())
        );
        assert_eq!(
            check(&schema(), &json!({"path": "x", "limit": null})),
            Ok(())
        );
    }

    #[test]
    fn every_problem_is_named() {
        let problems =
            check(&schema(), &json!({"limit": "3", "mode": "c", "colour": 1})).unwrap_err();
        assert_eq!(
            problems,
            vec![
                "missing required argument `path`".to_string(),
                "`limit` must be integer or null, not a string".to_string(),
                "`mode` must be one of \"a\", \"b\", not \"c\"".to_string(),
                "unknown argument `colour` (accepted: path, limit, mode)".to_string(),
            ]
        );
        assert_eq!(
            check(&schema(), &json!([1])).unwrap_err(),
            vec!["arguments must be a JSON object, not an array".to_string()]
        );
    }
}

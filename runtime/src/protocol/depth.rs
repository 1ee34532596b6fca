//! One depth limit for the JSON a model sends as tool-call arguments.
//!
//! A conversation is stored as JSON, one message per row, and read back
//! with serde_json, which stops at 128 nested levels (its recursion limit,
//! there to keep a hostile document from exhausting the stack). A stored
//! message wraps a call's arguments in three more levels, so arguments 126
//! deep were accepted, stored, and made the conversation impossible to load
//! ever again. So there is one limit, [`MAX_DEPTH`], far below what loading
//! reads: a call whose arguments nest deeper is answered with an error
//! result naming the limit ([`refusal`]), and the stored message keeps a
//! small stand-in in place of the arguments ([`stand_in`]), so nothing a
//! turn commits is deeper than what its own load reads.

use serde_json::{json, Value};

use crate::protocol::ToolCall;

/// The deepest nesting of objects and arrays accepted in tool-call
/// arguments (and kept in stored tool-result data).
pub const MAX_DEPTH: usize = 64;

/// The key of the stand-in object kept in place of too-deep JSON.
pub const STAND_IN_KEY: &str = "troupe_omitted";

/// How deeply `value` nests objects and arrays: 0 for a scalar, 1 for
/// `{}` or `[1]`. Walks without recursion, so any depth is safe to measure.
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|v| (v, level + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(level);
                stack.extend(map.values().map(|v| (v, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The small object to store in place of `value` when it nests deeper than
/// [`MAX_DEPTH`]; `None` when it is within the limit.
pub fn stand_in(value: &Value) -> Option<Value> {
    let levels = depth(value);
    (levels > MAX_DEPTH).then(|| {
        json!({
            STAND_IN_KEY: format!(
                "not kept: it nested {levels} levels deep, more than the limit of {MAX_DEPTH}"
            )
        })
    })
}

/// The error text answering a call whose arguments are too deep (or were
/// replaced by a stand-in when stored); `None` when they are within the limit.
pub fn refusal(call: &ToolCall) -> Option<String> {
    let levels = depth(&call.arguments);
    if levels > MAX_DEPTH {
        return Some(format!(
            "the arguments of `{}` nest objects and arrays {levels} levels deep; the limit is \
             {MAX_DEPTH}. The call did not run. Call it again with flatter arguments (pass deep \
             data as a JSON string or in a file).",
            call.name
        ));
    }
    call.arguments.get(STAND_IN_KEY).map(|_| {
        format!(
            "the arguments of `{}` nested objects and arrays more than {MAX_DEPTH} levels deep \
             and were not kept. The call did not run. Call it again with flatter arguments.",
            call.name
        )
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn nested(levels: usize) -> Value {
        let mut value = json!("leaf");
        for i in 0..levels {
            value = if i % 2 == 0 {
                json!({ "a": value })
            } else {
                json!([value])
            };
        }
        value
    }

    #[test]
    fn depth_counts_objects_and_arrays() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": 2}]})), 3);
        assert_eq!(depth(&nested(126)), 126);
    }

    #[test]
    fn arguments_at_the_limit_pass_and_one_deeper_are_refused() {
        let call = |levels| ToolCall {
            id: "c".into(),
            name: "write_file".into(),
            arguments: json!({ "path": nested(levels - 1) }),
        };
        assert_eq!(refusal(&call(MAX_DEPTH)), None);
        assert_eq!(stand_in(&call(MAX_DEPTH).arguments), None);
        let deep = call(MAX_DEPTH + 1);
        assert!(refusal(&deep).is_some_and(|t| t.contains("65 levels deep; the limit is 64")));
        let kept = stand_in(&deep.arguments).unwrap();
        assert_eq!(depth(&kept), 1);
        let reloaded = ToolCall {
            arguments: kept,
            ..deep
        };
        assert!(refusal(&reloaded).is_some_and(|t| t.contains("were not kept")));
    }
}

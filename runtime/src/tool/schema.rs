//! A tool's JSON schema, derived the first time something reads it.
//!
//! Deriving the built-in tools' schemas (schemars' generation, then
//! normalized and sorted by [`schema_for`](super::schema_for)) was a third
//! of a new home's start on its main thread, yet a start needs none of
//! them: they are read when a model request is serialized, when
//! `troupe tools` lists them, when a call is checked against its own tool's,
//! and when `tool_search` indexes the deferred ones. So a tool made from a
//! params type ([`Schema::of`]) keeps the function that derives its schema
//! and runs it once, when first read; every spec and model definition
//! cloned from it shares that one value. A schema given as JSON (an MCP
//! server's, a test's) is simply held.
//!
//! # Examples
//!
//! ```
//! use troupe_runtime::tool::Schema;
//!
//! /// Arguments of `shout`.
//! #[derive(schemars::JsonSchema)]
//! #[allow(dead_code)]
//! struct Params {
//!     /// What to shout.
//!     text: String,
//! }
//!
//! let schema = Schema::of::<Params>(); // nothing derived yet
//! let shared = schema.clone();
//! assert_eq!(shared["required"][0], "text"); // derived here, once for both
//! assert_eq!(schema["additionalProperties"], false);
//! ```

use std::sync::{Arc, OnceLock};

use serde_json::Value;

/// A JSON schema, derived when first read and shared by its clones.
#[derive(Clone)]
pub struct Schema(Arc<Cell>);

struct Cell {
    value: OnceLock<Value>,
    /// Derives the value; `None` when it was given.
    derive: Option<fn() -> Value>,
}

impl Schema {
    /// The schema of the params type `T` ([`schema_for`](super::schema_for)),
    /// derived the first time it is read.
    pub fn of<T: schemars::JsonSchema>() -> Self {
        Self(Arc::new(Cell {
            value: OnceLock::new(),
            derive: Some(super::schema_for::<T>),
        }))
    }

    /// The schema's JSON value (derived now if it was not yet).
    pub fn value(&self) -> &Value {
        let Cell { value, derive } = &*self.0;
        value.get_or_init(|| derive.map_or(Value::Null, |derive| derive()))
    }

    /// Whether `other` is this very schema (a clone of it), without reading
    /// either.
    pub fn same(&self, other: &Schema) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<Value> for Schema {
    fn from(value: Value) -> Self {
        Self(Arc::new(Cell {
            value: OnceLock::from(value),
            derive: None,
        }))
    }
}

impl std::ops::Deref for Schema {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl AsRef<Value> for Schema {
    fn as_ref(&self) -> &Value {
        self.value()
    }
}

/// Equal when they are the same schema, or their values are equal.
impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || self.value() == other.value()
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.value(), f)
    }
}

impl std::fmt::Display for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self.value(), f)
    }
}

impl serde::Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Schema {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Schema::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Params {
        /// A path.
        path: String,
    }

    #[test]
    fn a_derived_schema_is_what_schema_for_gives_and_its_clones_share_it() {
        let schema = Schema::of::<Params>();
        let clone = schema.clone();
        assert!(schema.0.value.get().is_none(), "derived before it was read");
        assert_eq!(*clone, super::super::schema_for::<Params>());
        assert!(std::ptr::eq(schema.value(), clone.value()));
        assert!(schema.same(&clone));
    }

    #[test]
    fn given_and_derived_schemas_compare_and_serialize_by_value() {
        let derived = Schema::of::<Params>();
        let given = Schema::from(super::super::schema_for::<Params>());
        assert_eq!(derived, given);
        assert!(!derived.same(&given));
        assert_eq!(
            serde_json::to_string(&derived).unwrap(),
            serde_json::to_string(&*given).unwrap()
        );
        let back: Schema = serde_json::from_str(&serde_json::to_string(&derived).unwrap()).unwrap();
        assert_eq!(back, derived);
        assert_ne!(Schema::from(serde_json::json!({"type": "object"})), derived);
    }
}

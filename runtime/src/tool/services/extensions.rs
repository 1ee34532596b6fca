//! The services a tool call finds by type: the extension point of the
//! Rust API, where a `#[tool]` function keeps what it needs between calls.
//!
//! Held here: a Rust program's own tools' state, and the built-in tools'
//! that keep theirs the same way (a conversation's plan and skills in
//! use); nothing the node lends. What [`super::NodeServices`] and
//! [`super::ConversationServices`] hold (the read ledger, the background
//! commands and the command notifier, the executors' accounts, a turn's
//! channel to the user and its budget scope, the deferred tool catalog,
//! the gate session, …) is never looked up here.

use std::any::{Any, TypeId};
use std::sync::Arc;

use parking_lot::RwLock;

type Entry = (TypeId, Arc<dyn Any + Send + Sync>);

/// What tools keep between calls, looked up by type. Cloning shares it.
///
/// A [fork](Extensions::fork) is a layer over its parent: what it adds or
/// removes stays in the layer, what it does not hold it finds in the
/// parent (including what the parent gets later). A layer is a short
/// vector, so a conversation's services cost a few words, not a map.
#[derive(Clone, Default)]
pub struct Extensions {
    layer: Arc<RwLock<Vec<Entry>>>,
    parent: Option<Box<Extensions>>,
}

impl Extensions {
    /// Adds (or replaces) a service in this layer.
    pub fn insert<T: Any + Send + Sync>(&self, value: Arc<T>) {
        let key = TypeId::of::<T>();
        let mut layer = self.layer.write();
        match layer.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => layer.push((key, value)),
        }
    }

    /// Takes the service of type `T` out of this layer.
    pub fn remove<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let key = TypeId::of::<T>();
        let mut layer = self.layer.write();
        let at = layer.iter().position(|(k, _)| *k == key)?;
        let (_, value) = layer.swap_remove(at);
        value.downcast::<T>().ok()
    }

    /// The service of type `T`, if this layer or a parent holds one.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let key = TypeId::of::<T>();
        let mut layer_of = Some(self);
        while let Some(s) = layer_of {
            if let Some((_, value)) = s.layer.read().iter().find(|(k, _)| *k == key) {
                return Arc::clone(value).downcast::<T>().ok();
            }
            layer_of = s.parent.as_deref();
        }
        None
    }

    /// The service of type `T`, made with `make` (in this layer) the first time.
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        if let Some(found) = self.get::<T>() {
            return found;
        }
        let key = TypeId::of::<T>();
        let mut layer = self.layer.write();
        // Another caller may have made it meanwhile.
        if let Some((_, value)) = layer.iter().find(|(k, _)| *k == key) {
            if let Ok(value) = Arc::clone(value).downcast::<T>() {
                return value;
            }
        }
        let value = Arc::new(make());
        layer.push((key, value.clone()));
        value
    }

    /// A layer over these services, to which more can be added (or
    /// replaced) without changing them.
    pub fn fork(&self) -> Self {
        Self {
            layer: Arc::default(),
            parent: Some(Box::new(self.clone())),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.layer.read().len() + self.parent.as_ref().map_or(0, |p| p.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions_are_found_by_type_and_forks_are_independent() {
        let services = Extensions::default();
        services.insert(Arc::new(5_u32));
        assert_eq!(*services.get::<u32>().unwrap(), 5);
        assert!(services.get::<String>().is_none());
        let fork = services.fork();
        fork.insert(Arc::new(String::from("x")));
        assert!(services.get::<String>().is_none());
        assert_eq!(*fork.get::<u32>().unwrap(), 5);
        let made = services.get_or_insert_with(|| 7_u64);
        assert_eq!(*made, 7);
        assert_eq!(*services.get_or_insert_with(|| 9_u64), 7);
        // A fork sees what its parent gets later, and shadows without changing it.
        assert_eq!(*fork.get::<u64>().unwrap(), 7);
        fork.insert(Arc::new(8_u64));
        assert_eq!(*fork.get::<u64>().unwrap(), 8);
        assert_eq!(*services.get::<u64>().unwrap(), 7);
        assert_eq!(*fork.remove::<u64>().unwrap(), 8);
        assert_eq!(*fork.get::<u64>().unwrap(), 7);
    }
}

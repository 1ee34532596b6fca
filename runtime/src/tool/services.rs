//! A type map of the services actors lend to tools.
//!
//! Tools live in `troupe-tools`, below the actors in the dependency order, so
//! they cannot name an actor. What they need from one (the store, a way to ask
//! the user, a way to notify the conversation, per-conversation state such as
//! which files were read) is a trait or a type from this crate, inserted here
//! by the actor that runs the conversation and looked up by type.

use std::any::{Any, TypeId};
use std::sync::Arc;

use dashmap::DashMap;

/// Services available to a tool call, looked up by type. Cloning shares them.
#[derive(Clone, Default)]
pub struct Services {
    map: Arc<DashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Services {
    /// Adds (or replaces) a service.
    pub fn insert<T: Any + Send + Sync>(&self, value: Arc<T>) {
        self.map.insert(TypeId::of::<T>(), value);
    }

    /// Takes the service of type `T` out.
    pub fn remove<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let (_, value) = self.map.remove(&TypeId::of::<T>())?;
        value.downcast::<T>().ok()
    }

    /// The service of type `T`, if one was provided.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        let entry = self.map.get(&TypeId::of::<T>())?;
        Arc::clone(entry.value()).downcast::<T>().ok()
    }

    /// The service of type `T`, made with `make` the first time.
    pub fn get_or_insert_with<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let value = Arc::clone(
            self.map
                .entry(TypeId::of::<T>())
                .or_insert_with(|| Arc::new(make()))
                .value(),
        );
        match value.downcast::<T>() {
            Ok(value) => value,
            // The key is T's TypeId, so the value is always a T.
            Err(_) => unreachable!(
                "service map holds another type under {}",
                std::any::type_name::<T>()
            ),
        }
    }

    /// A copy holding the same services, to which more can be added without
    /// changing this one.
    pub fn fork(&self) -> Self {
        let map = DashMap::new();
        for entry in self.map.iter() {
            map.insert(*entry.key(), Arc::clone(entry.value()));
        }
        Self { map: Arc::new(map) }
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Services")
            .field("count", &self.map.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_are_found_by_type_and_forks_are_independent() {
        let services = Services::default();
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
    }
}

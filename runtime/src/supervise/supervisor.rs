//! The supervisor actor: starts its children, watches their exits and
//! restarts them by policy.

use std::time::Duration;

use ractor::{
    Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, RactorErr, RpcReplyPort,
    SupervisionEvent,
};

use super::{
    ChildSpec, ChildState, ChildStatus, ExitReason, Restart, RestartLog, Strategy, SupervisorEvent,
    SupervisorSpec,
};

/// Why a supervisor failed. Its parent sees the display text in
/// [`ExitReason::Failed`]; the boxed error can be downcast to this type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SupervisorError {
    /// A child failed to start while the supervisor itself was starting.
    #[error("child {child:?} failed to start ({error}); the supervisor did not start — fix what the child's start reports")]
    ChildStart {
        /// The child's id.
        child: String,
        /// The factory's error.
        error: String,
    },
    /// More restarts were needed than the intensity allows.
    #[error("restart intensity exceeded: {restarts} restarts within {within:?} (limit {max}); the supervisor stopped its children and gave up")]
    IntensityExceeded {
        /// The restarts counted in the window.
        restarts: u32,
        /// The limit.
        max: u32,
        /// The window.
        within: Duration,
    },
}

/// What a supervisor can be asked.
#[derive(Debug)]
pub enum SupervisorMsg {
    /// The status of every child, in start order.
    Children(RpcReplyPort<Vec<ChildStatus>>),
    /// The running incarnation of the child with this id, if any.
    Child(String, RpcReplyPort<Option<ActorCell>>),
    /// A backoff elapsed: start the children waiting to be restarted.
    RestartDue,
    /// Adds a child after the others and starts it (OTP's `start_child`);
    /// answers with its cell, or why it could not start (it is then not kept).
    StartChild(ChildSpec, RpcReplyPort<Result<ActorCell, String>>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for SupervisorMsg {}

/// The supervisor actor. Spawn it with a [`SupervisorSpec`] as arguments,
/// linked to its own parent so that its failure escalates.
#[derive(Debug, Default, Clone, Copy)]
pub struct Supervisor;

struct Child {
    spec: ChildSpec,
    cell: Option<ActorCell>,
    state: ChildState,
    restarts: u32,
    last_exit: Option<ExitReason>,
}

/// The supervisor's state: its spec, its children and its restart log.
pub struct SupervisorState {
    spec: SupervisorSpec,
    children: Vec<Child>,
    log: RestartLog,
}

impl SupervisorState {
    fn emit(&self, event: SupervisorEvent) {
        if let Some(events) = &self.spec.events {
            let _ = events.send(event);
        }
    }

    fn index_of(&self, id: ActorId) -> Option<usize> {
        self.children
            .iter()
            .position(|c| c.cell.as_ref().is_some_and(|cell| cell.get_id() == id))
    }

    fn status(&self) -> Vec<ChildStatus> {
        self.children
            .iter()
            .map(|c| ChildStatus {
                id: c.spec.id.clone(),
                state: c.state,
                restarts: c.restarts,
                last_exit: c.last_exit.clone(),
            })
            .collect()
    }

    /// Stops the running child at `index` (graceful, then killed past its
    /// deadline) and records why it exited.
    async fn stop_at(&mut self, index: usize, then: ChildState) {
        let Some(child) = self.children.get_mut(index) else {
            return;
        };
        let Some(cell) = child.cell.take() else {
            return;
        };
        let reason = stop_child(&cell, child.spec.shutdown).await;
        child.last_exit = Some(reason.clone());
        child.state = then;
        let event = SupervisorEvent::Exited {
            child: child.spec.id.clone(),
            reason,
        };
        self.emit(event);
    }

    /// Stops every running child in reverse start order.
    async fn shutdown_all(&mut self) {
        for index in (0..self.children.len()).rev() {
            self.stop_at(index, ChildState::Stopped).await;
        }
    }

    /// Counts one restart; past the intensity, stops everything and returns
    /// the error the supervisor fails with.
    async fn count_restart(&mut self) -> Result<(), ActorProcessingErr> {
        let limit = self.spec.intensity;
        if self.log.record(limit) {
            return Ok(());
        }
        let restarts = self.log.recent();
        self.emit(SupervisorEvent::GaveUp {
            restarts,
            within: limit.within,
        });
        self.shutdown_all().await;
        Err(Box::new(SupervisorError::IntensityExceeded {
            restarts,
            max: limit.max_restarts,
            within: limit.within,
        }))
    }
}

/// Stops `cell` gracefully with the reason `"shutdown"`, kills it if it has
/// not exited within `deadline`, and says which of the two ended it.
pub async fn stop_child(cell: &ActorCell, deadline: Duration) -> ExitReason {
    match cell
        .stop_and_wait(Some(ExitReason::SHUTDOWN.to_string()), Some(deadline))
        .await
    {
        Ok(()) => ExitReason::Shutdown,
        Err(RactorErr::Timeout) => {
            let _ = cell.kill_and_wait(Some(deadline)).await;
            ExitReason::Killed
        }
        // It had already exited; a clean shutdown is what the caller wanted.
        Err(_) => ExitReason::Shutdown,
    }
}

impl Supervisor {
    async fn on_exit(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
        cell: ActorCell,
        reason: ExitReason,
    ) -> Result<(), ActorProcessingErr> {
        // Exits of incarnations the supervisor already stopped or replaced
        // are stale: it recorded those itself.
        let Some(index) = state.index_of(cell.get_id()) else {
            return Ok(());
        };
        let restart = {
            let child = &mut state.children[index];
            child.cell = None;
            child.last_exit = Some(reason.clone());
            child.spec.restart.restarts_after(&reason)
        };
        let id = state.children[index].spec.id.clone();
        state.emit(SupervisorEvent::Exited { child: id, reason });
        if !restart {
            state.children[index].state = ChildState::Stopped;
            return Ok(());
        }
        state.count_restart().await?;
        let last = state.children.len();
        let group = match state.spec.strategy {
            Strategy::OneForOne => index..index + 1,
            Strategy::OneForAll => 0..last,
            Strategy::RestForOne => index..last,
        };
        for sibling in group.rev() {
            if sibling == index {
                continue;
            }
            let then = match state.children[sibling].spec.restart {
                Restart::Temporary => ChildState::Stopped,
                Restart::Permanent | Restart::Transient => ChildState::RestartPending,
            };
            state.stop_at(sibling, then).await;
        }
        state.children[index].state = ChildState::RestartPending;
        self.schedule_restart(myself, state).await
    }

    async fn schedule_restart(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> Result<(), ActorProcessingErr> {
        loop {
            let delay = state.spec.backoff.delay(state.log.recent());
            if !delay.is_zero() {
                myself.send_after(delay, || SupervisorMsg::RestartDue);
                return Ok(());
            }
            if self.restart_pending(myself, state).await {
                return Ok(());
            }
            state.count_restart().await?;
        }
    }

    /// Starts every child waiting for a restart, in start order. Returns
    /// `false` when one failed to start (it stays pending).
    async fn restart_pending(
        &self,
        myself: &ActorRef<SupervisorMsg>,
        state: &mut SupervisorState,
    ) -> bool {
        for index in 0..state.children.len() {
            if state.children[index].state != ChildState::RestartPending {
                continue;
            }
            let started = state.children[index].spec.start(myself.get_cell()).await;
            let child = &mut state.children[index];
            match started {
                Ok(cell) => {
                    child.cell = Some(cell);
                    child.state = ChildState::Running;
                    child.restarts += 1;
                    let event = SupervisorEvent::Started {
                        child: child.spec.id.clone(),
                        restarts: child.restarts,
                    };
                    state.emit(event);
                }
                Err(error) => {
                    let event = SupervisorEvent::StartFailed {
                        child: child.spec.id.clone(),
                        error: error.to_string(),
                    };
                    state.emit(event);
                    return false;
                }
            }
        }
        true
    }
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = SupervisorState;
    type Arguments = SupervisorSpec;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        spec: SupervisorSpec,
    ) -> Result<Self::State, ActorProcessingErr> {
        let children = spec
            .children
            .iter()
            .map(|spec| Child {
                spec: spec.clone(),
                cell: None,
                state: ChildState::Stopped,
                restarts: 0,
                last_exit: None,
            })
            .collect();
        let mut state = SupervisorState {
            spec,
            children,
            log: RestartLog::default(),
        };
        for index in 0..state.children.len() {
            let started = state.children[index].spec.start(myself.get_cell()).await;
            let id = state.children[index].spec.id.clone();
            match started {
                Ok(cell) => {
                    let child = &mut state.children[index];
                    child.cell = Some(cell);
                    child.state = ChildState::Running;
                    state.emit(SupervisorEvent::Started {
                        child: id,
                        restarts: 0,
                    });
                }
                Err(error) => {
                    let error = error.to_string();
                    state.emit(SupervisorEvent::StartFailed {
                        child: id.clone(),
                        error: error.clone(),
                    });
                    state.shutdown_all().await;
                    return Err(Box::new(SupervisorError::ChildStart { child: id, error }));
                }
            }
        }
        Ok(state)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.shutdown_all().await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            SupervisorMsg::Children(reply) => {
                let _ = reply.send(state.status());
            }
            SupervisorMsg::Child(id, reply) => {
                let cell = state
                    .children
                    .iter()
                    .find(|c| c.spec.id == id)
                    .and_then(|c| c.cell.clone());
                let _ = reply.send(cell);
            }
            SupervisorMsg::StartChild(spec, reply) => {
                let answer = if state.children.iter().any(|c| c.spec.id == spec.id) {
                    Err(format!("a child named {:?} exists already", spec.id))
                } else {
                    match spec.start(myself.get_cell()).await {
                        Ok(cell) => {
                            let id = spec.id.clone();
                            state.children.push(Child {
                                spec,
                                cell: Some(cell.clone()),
                                state: ChildState::Running,
                                restarts: 0,
                                last_exit: None,
                            });
                            state.emit(SupervisorEvent::Started {
                                child: id,
                                restarts: 0,
                            });
                            Ok(cell)
                        }
                        Err(error) => {
                            let error = error.to_string();
                            state.emit(SupervisorEvent::StartFailed {
                                child: spec.id.clone(),
                                error: error.clone(),
                            });
                            Err(error)
                        }
                    }
                };
                let _ = reply.send(answer);
            }
            SupervisorMsg::RestartDue => {
                if !self.restart_pending(&myself, state).await {
                    state.count_restart().await?;
                    self.schedule_restart(&myself, state).await?;
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match ExitReason::from_event(&event) {
            Some((cell, reason)) => self.on_exit(&myself, state, cell, reason).await,
            None => Ok(()),
        }
    }
}

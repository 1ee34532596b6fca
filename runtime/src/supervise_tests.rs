//! The supervision matrix and the supervisor's lifecycle, with real ractor
//! actors.

use std::time::Duration;

use pretty_assertions::assert_eq;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::*;

const WAIT: Duration = Duration::from_secs(10);

/// How a worker is told to exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Normal,
    Shutdown,
    Panic,
    Error,
}

enum WorkerMsg {
    Exit(Exit),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for WorkerMsg {}

#[derive(Clone)]
struct WorkerArgs {
    name: &'static str,
    log: UnboundedSender<String>,
    fail_start: bool,
    hang_on_stop: bool,
}

struct Worker;

impl Actor for Worker {
    type Msg = WorkerMsg;
    type State = WorkerArgs;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<WorkerMsg>,
        args: WorkerArgs,
    ) -> Result<WorkerArgs, ActorProcessingErr> {
        if args.fail_start {
            return Err(format!("{} cannot open its store", args.name).into());
        }
        let _ = args.log.send(format!("start:{}", args.name));
        Ok(args)
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<WorkerMsg>,
        state: &mut WorkerArgs,
    ) -> Result<(), ActorProcessingErr> {
        if state.hang_on_stop {
            std::future::pending::<()>().await;
        }
        let _ = state.log.send(format!("stop:{}", state.name));
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<WorkerMsg>,
        message: WorkerMsg,
        state: &mut WorkerArgs,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::Exit(Exit::Normal) => myself.stop(None),
            WorkerMsg::Exit(Exit::Shutdown) => myself.stop(Some("shutdown".into())),
            WorkerMsg::Exit(Exit::Panic) => panic!("boom {}", state.name),
            WorkerMsg::Exit(Exit::Error) => return Err(format!("error {}", state.name).into()),
        }
        Ok(())
    }
}

fn worker(name: &'static str, log: &UnboundedSender<String>) -> WorkerArgs {
    WorkerArgs {
        name,
        log: log.clone(),
        fail_start: false,
        hang_on_stop: false,
    }
}

fn child(args: WorkerArgs) -> ChildSpec {
    ChildSpec::actor(args.name, move || (Worker, args.clone())).shutdown(Duration::from_millis(200))
}

fn drain<T>(rx: &mut UnboundedReceiver<T>) -> Vec<T> {
    let mut out = Vec::new();
    while let Ok(item) = rx.try_recv() {
        out.push(item);
    }
    out
}

async fn next<T>(rx: &mut UnboundedReceiver<T>) -> T {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("channel closed"),
        Err(_) => panic!("no event within {WAIT:?}"),
    }
}

async fn children(sup: &ActorRef<SupervisorMsg>) -> Vec<ChildStatus> {
    ractor::call!(sup, SupervisorMsg::Children).expect("supervisor answers")
}

async fn send_exit(sup: &ActorRef<SupervisorMsg>, id: &str, how: Exit) {
    let cell = ractor::call!(sup, SupervisorMsg::Child, id.to_string())
        .expect("supervisor answers")
        .expect("child runs");
    let actor: ActorRef<WorkerMsg> = cell.into();
    actor
        .send_message(WorkerMsg::Exit(how))
        .expect("child takes messages");
}

fn started(child: &str, restarts: u32) -> SupervisorEvent {
    SupervisorEvent::Started {
        child: child.into(),
        restarts,
    }
}

fn exited(child: &str, reason: ExitReason) -> SupervisorEvent {
    SupervisorEvent::Exited {
        child: child.into(),
        reason,
    }
}

fn status(
    id: &str,
    state: ChildState,
    restarts: u32,
    last_exit: Option<ExitReason>,
) -> ChildStatus {
    ChildStatus {
        id: id.into(),
        state,
        restarts,
        last_exit,
    }
}

/// What the supervisor must report after `b` (of a, b, c) exits.
fn expected(
    strategy: Strategy,
    kind: Restart,
    reason: &ExitReason,
) -> (Vec<SupervisorEvent>, Vec<ChildStatus>) {
    use ChildState::{Running, Stopped};
    let mut events = vec![exited("b", reason.clone())];
    let last = Some(reason.clone());
    let shut = Some(ExitReason::Shutdown);
    if !kind.restarts_after(reason) {
        return (
            events,
            vec![
                status("a", Running, 0, None),
                status("b", Stopped, 0, last),
                status("c", Running, 0, None),
            ],
        );
    }
    let statuses = match strategy {
        Strategy::OneForOne => {
            events.push(started("b", 1));
            vec![
                status("a", Running, 0, None),
                status("b", Running, 1, last),
                status("c", Running, 0, None),
            ]
        }
        Strategy::OneForAll => {
            events.extend([
                exited("c", ExitReason::Shutdown),
                exited("a", ExitReason::Shutdown),
                started("a", 1),
                started("b", 1),
                started("c", 1),
            ]);
            vec![
                status("a", Running, 1, shut.clone()),
                status("b", Running, 1, last),
                status("c", Running, 1, shut),
            ]
        }
        Strategy::RestForOne => {
            events.extend([
                exited("c", ExitReason::Shutdown),
                started("b", 1),
                started("c", 1),
            ]);
            vec![
                status("a", Running, 0, None),
                status("b", Running, 1, last),
                status("c", Running, 1, shut),
            ]
        }
    };
    (events, statuses)
}

#[tokio::test]
async fn supervision_matrix_restarts_exactly_the_right_children() {
    let exits = [
        (Exit::Normal, ExitReason::Normal),
        (Exit::Shutdown, ExitReason::Shutdown),
        (Exit::Panic, ExitReason::Failed("boom b".into())),
        (Exit::Error, ExitReason::Failed("error b".into())),
    ];
    for strategy in [
        Strategy::OneForOne,
        Strategy::OneForAll,
        Strategy::RestForOne,
    ] {
        for kind in [Restart::Permanent, Restart::Transient, Restart::Temporary] {
            for (how, reason) in &exits {
                let case = format!("{strategy:?} × {kind:?} × {how:?}");
                let (log, _log_rx) = unbounded_channel();
                let (tx, mut events) = unbounded_channel();
                let spec = SupervisorSpec::new(strategy)
                    .intensity(Intensity::new(10, Duration::from_secs(60)))
                    .child(child(worker("a", &log)))
                    .child(child(worker("b", &log)).restart(kind))
                    .child(child(worker("c", &log)))
                    .events(tx);
                let (sup, handle) = Actor::spawn(None, Supervisor, spec).await.expect("starts");
                assert_eq!(
                    drain(&mut events),
                    vec![started("a", 0), started("b", 0), started("c", 0)],
                    "{case}"
                );
                send_exit(&sup, "b", *how).await;
                let first = next(&mut events).await;
                // The exit is handled (restarts included) before the query.
                let statuses = children(&sup).await;
                let mut seen = vec![first];
                seen.extend(drain(&mut events));
                let (want_events, want_statuses) = expected(strategy, kind, reason);
                assert_eq!(seen, want_events, "{case}");
                assert_eq!(statuses, want_statuses, "{case}");
                sup.stop_and_wait(None, Some(WAIT)).await.expect("stops");
                handle.await.expect("joins");
            }
        }
    }
}

#[tokio::test]
async fn children_start_in_order_and_stop_in_reverse_order() {
    let (log, mut log_rx) = unbounded_channel();
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .child(child(worker("a", &log)))
        .child(child(worker("b", &log)))
        .child(child(worker("c", &log)));
    let (sup, handle) = Actor::spawn(None, Supervisor, spec).await.expect("starts");
    sup.stop_and_wait(None, Some(WAIT)).await.expect("stops");
    handle.await.expect("joins");
    assert_eq!(
        drain(&mut log_rx),
        ["start:a", "start:b", "start:c", "stop:c", "stop:b", "stop:a"]
    );
}

#[tokio::test]
async fn hung_child_is_killed_after_its_shutdown_deadline() {
    let (log, mut log_rx) = unbounded_channel();
    let (tx, mut events) = unbounded_channel();
    let hung = WorkerArgs {
        hang_on_stop: true,
        ..worker("hung", &log)
    };
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .child(child(worker("a", &log)))
        .child(child(hung).shutdown(Duration::from_millis(50)))
        .events(tx);
    let (sup, handle) = Actor::spawn(None, Supervisor, spec).await.expect("starts");
    sup.stop_and_wait(None, Some(WAIT)).await.expect("stops");
    handle.await.expect("joins");
    assert_eq!(
        drain(&mut events),
        vec![
            started("a", 0),
            started("hung", 0),
            exited("hung", ExitReason::Killed),
            exited("a", ExitReason::Shutdown),
        ]
    );
    assert_eq!(drain(&mut log_rx), ["start:a", "start:hung", "stop:a"]);
}

#[tokio::test]
async fn child_failing_to_start_fails_the_supervisor_start() {
    let (log, mut log_rx) = unbounded_channel();
    let broken = WorkerArgs {
        fail_start: true,
        ..worker("b", &log)
    };
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .child(child(worker("a", &log)))
        .child(child(broken))
        .child(child(worker("c", &log)));
    let err = Actor::spawn(None, Supervisor, spec)
        .await
        .expect_err("the supervisor must not start");
    let ractor::SpawnErr::StartupFailed(err) = err else {
        panic!("unexpected spawn error {err:?}");
    };
    let err = err
        .downcast_ref::<SupervisorError>()
        .expect("a supervisor error");
    assert_eq!(
        err,
        &SupervisorError::ChildStart {
            child: "b".into(),
            error: "Actor panicked during startup 'b cannot open its store'".into(),
        }
    );
    assert_eq!(drain(&mut log_rx), ["start:a", "stop:a"]);
}

/// A parent that reports its children's exits to the test.
struct Parent;

impl Actor for Parent {
    type Msg = ();
    type State = UnboundedSender<ExitReason>;
    type Arguments = UnboundedSender<ExitReason>;

    async fn pre_start(
        &self,
        _myself: ActorRef<()>,
        exits: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(exits)
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<()>,
        event: SupervisionEvent,
        exits: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((_, reason)) = ExitReason::from_event(&event) {
            let _ = exits.send(reason);
        }
        Ok(())
    }
}

#[tokio::test]
async fn exceeding_restart_intensity_fails_the_supervisor_to_its_parent() {
    let (log, _log_rx) = unbounded_channel();
    let (tx, mut events) = unbounded_channel();
    let (exits_tx, mut exits) = unbounded_channel();
    let (parent, _) = Actor::spawn(None, Parent, exits_tx).await.expect("parent");
    let within = Duration::from_secs(60);
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .intensity(Intensity::new(2, within))
        .child(child(worker("a", &log)))
        .child(child(worker("b", &log)))
        .events(tx);
    let (sup, _) = Supervisor::spawn_linked(None, Supervisor, spec, parent.get_cell())
        .await
        .expect("starts");
    assert_eq!(drain(&mut events), vec![started("a", 0), started("b", 0)]);
    for round in 1..=2 {
        send_exit(&sup, "b", Exit::Panic).await;
        let mut seen = Vec::new();
        while seen.len() < 2 {
            seen.push(next(&mut events).await);
        }
        assert_eq!(
            seen,
            vec![
                exited("b", ExitReason::Failed("boom b".into())),
                started("b", round)
            ]
        );
    }
    send_exit(&sup, "b", Exit::Panic).await;
    let failure = next(&mut exits).await;
    assert_eq!(
        failure,
        ExitReason::Failed(
            SupervisorError::IntensityExceeded {
                restarts: 3,
                max: 2,
                within,
            }
            .to_string()
        )
    );
    assert_eq!(
        drain(&mut events),
        vec![
            exited("b", ExitReason::Failed("boom b".into())),
            SupervisorEvent::GaveUp {
                restarts: 3,
                within,
            },
            exited("a", ExitReason::Shutdown),
        ]
    );
    parent.stop(None);
}

#[tokio::test]
async fn backoff_delays_the_restart() {
    let (log, _log_rx) = unbounded_channel();
    let (tx, mut events) = unbounded_channel();
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .backoff(Backoff::Fixed(Duration::from_millis(300)))
        .child(child(worker("a", &log)))
        .events(tx);
    let (sup, _) = Actor::spawn(None, Supervisor, spec).await.expect("starts");
    assert_eq!(drain(&mut events), vec![started("a", 0)]);
    let before = tokio::time::Instant::now();
    send_exit(&sup, "a", Exit::Error).await;
    assert_eq!(
        next(&mut events).await,
        exited("a", ExitReason::Failed("error a".into()))
    );
    assert_eq!(
        children(&sup).await,
        vec![status(
            "a",
            ChildState::RestartPending,
            0,
            Some(ExitReason::Failed("error a".into()))
        )]
    );
    assert_eq!(next(&mut events).await, started("a", 1));
    assert!(before.elapsed() >= Duration::from_millis(300));
    sup.stop_and_wait(None, Some(WAIT)).await.expect("stops");
}

#[test]
fn backoff_and_intensity_arithmetic() {
    let exp = Backoff::Exponential {
        base: Duration::from_millis(10),
        max: Duration::from_millis(35),
    };
    assert_eq!(
        [1, 2, 3, 4].map(|n| exp.delay(n)),
        [10, 20, 35, 35].map(Duration::from_millis)
    );
    assert_eq!(Backoff::None.delay(7), Duration::ZERO);
    let limit = Intensity::new(2, Duration::from_secs(60));
    let mut log = RestartLog::default();
    assert_eq!(
        [log.record(limit), log.record(limit), log.record(limit)],
        [true, true, false]
    );
    assert_eq!(log.recent(), 3);
}

#[tokio::test]
async fn a_child_added_later_is_supervised_like_the_first_ones() {
    let (log, mut log_rx) = unbounded_channel();
    let (tx, mut events) = unbounded_channel();
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .child(child(worker("a", &log)))
        .events(tx);
    let (sup, handle) = Actor::spawn(None, Supervisor, spec).await.expect("starts");
    assert_eq!(next(&mut events).await, started("a", 0));

    let added = ractor::call!(sup, SupervisorMsg::StartChild, child(worker("late", &log)))
        .expect("supervisor answers");
    assert!(added.is_ok(), "{added:?}");
    assert_eq!(next(&mut events).await, started("late", 0));
    // A second child of the same name is refused, and changes nothing.
    let twice = ractor::call!(sup, SupervisorMsg::StartChild, child(worker("late", &log)))
        .expect("supervisor answers");
    assert!(twice.is_err_and(|e| e.contains("exists already")));

    // It fails: restarted by policy, after the children started before it.
    send_exit(&sup, "late", Exit::Panic).await;
    assert!(matches!(
        next(&mut events).await,
        SupervisorEvent::Exited { child, reason: ExitReason::Failed(_) } if child == "late"
    ));
    assert_eq!(next(&mut events).await, started("late", 1));
    let ids: Vec<_> = children(&sup).await.into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["a", "late"]);

    sup.stop_and_wait(None, Some(WAIT)).await.expect("stops");
    handle.await.expect("joins");
    assert_eq!(
        drain(&mut log_rx),
        ["start:a", "start:late", "start:late", "stop:late", "stop:a"]
    );
}

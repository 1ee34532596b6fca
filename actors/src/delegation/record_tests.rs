use std::sync::Arc;

use super::*;
use troupe_runtime::store::Store;

fn one_task() -> Vec<(SubagentId, ConversationId, String, String)> {
    vec![(
        SubagentId::new(),
        ConversationId::new(),
        "look".into(),
        String::new(),
    )]
}

/// Admits a delegation of `bot` with `tasks` subagents under `admission`.
async fn admit_tasks(store: &Store, bot: &str, tasks: usize, admission: &Admission) -> Admitted {
    let rows: Vec<_> = (0..tasks).flat_map(|_| one_task()).collect();
    let (bot, admission) = (bot.to_string(), admission.clone());
    store
        .write(move |tx| {
            admit(
                tx,
                DelegationId::new(),
                ConversationId::new(),
                &bot,
                false,
                &rows,
                &admission,
            )
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_hundred_concurrent_delegations_never_pass_the_node_limit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db")).unwrap();
    let admission = Arc::new(Admission {
        per_bot: usize::MAX,
        per_node: 10,
        ..Admission::default()
    });
    let calls = (0..100).map(|i| {
        let (store, admission) = (store.clone(), Arc::clone(&admission));
        tokio::spawn(
            async move { admit_tasks(&store, &format!("bot{}", i % 7), 1, &admission).await },
        )
    });
    let answers = futures::future::join_all(calls).await;
    let admitted = answers
        .iter()
        .filter(|a| matches!(a.as_ref().unwrap(), Admitted::Yes))
        .count();
    assert_eq!(admitted, 10);
    let refused = answers.iter().find_map(|a| match a.as_ref().unwrap() {
        Admitted::No(why) => Some(why.clone()),
        Admitted::Yes => None,
    });
    assert!(
        refused.unwrap().contains("max_concurrent_per_node"),
        "the refusal names the setting"
    );
    let running: i64 = store
        .read(|c| {
            Ok(c.query_row(
                "SELECT COUNT(*) FROM subagents WHERE status = 'running'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(running, 10);
}

#[tokio::test]
async fn the_limit_counts_what_the_store_holds_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let admission = Admission {
        per_bot: 2,
        ..Admission::default()
    };
    {
        let store = Store::open(&path).unwrap();
        assert_eq!(
            admit_tasks(&store, "main", 2, &admission).await,
            Admitted::Yes
        );
    }
    // A new process: its two subagents still count.
    let store = Store::open(&path).unwrap();
    let again = admit_tasks(&store, "main", 1, &admission).await;
    assert!(
        matches!(&again, Admitted::No(why) if why.contains("2 subagent(s) of `main` are running")),
        "{again:?}"
    );
}

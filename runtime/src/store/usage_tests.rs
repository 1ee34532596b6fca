//! Model usage: each call appended, folded later by the idle writer, and
//! read whole through `usage_all` either way.

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn usage_adds_up_per_conversation_and_day() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).unwrap();
    let (bot, conv) = (BotId::new(), ConversationId::new());
    let at = chrono::DateTime::parse_from_rfc3339("2026-03-01T10:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let call = crate::protocol::Usage {
        input_tokens: 100,
        output_tokens: 10,
        cache_read_tokens: 5,
        cache_write_tokens: 1,
    };
    // Three calls: two to one model, one to another.
    let three_calls = || {
        store
            .write_blocking(move |tx| {
                usage::add(tx, conv, bot, "m1", &call, 0.25, at)?;
                usage::add(tx, conv, bot, "m1", &call, 0.25, at)?;
                usage::add(tx, conv, bot, "m2", &call, 1.0, at)
            })
            .unwrap()
    };
    three_calls();
    let totals = || {
        store
            .read_blocking(move |conn| {
                Ok((
                    usage::for_conversation(conn, conv)?,
                    usage::for_bot_on(conn, bot, "2026-03-01")?,
                    usage::for_day(conn, "2026-03-02")?,
                    usage::by_bot_and_day(conn)?,
                ))
            })
            .unwrap()
    };
    let times = |n: u64| usage::UsageTotal {
        calls: 3 * n,
        usage: crate::protocol::Usage {
            input_tokens: 300 * n,
            output_tokens: 30 * n,
            cache_read_tokens: 15 * n,
            cache_write_tokens: 3 * n,
        },
        cost_usd: 1.5 * n as f64,
    };
    let rows = || column::<i64>(&store, "SELECT calls FROM usage ORDER BY model");
    let waiting = || column::<i64>(&store, "SELECT count(*) FROM usage_pending");
    // Counted from their commit, while they wait to be folded.
    let (total, day, other_day, daily) = totals();
    assert_eq!(total, times(1));
    assert_eq!(day, times(1));
    assert_eq!(other_day, usage::UsageTotal::default());
    assert_eq!((daily.len(), &daily[0].total), (1, &times(1)));
    assert_eq!((rows(), waiting()), (vec![], vec![3]));

    // Folded into a row per conversation, day and model: the same totals.
    store.write_blocking(catch_up::catch_up).unwrap();
    assert_eq!((rows(), waiting()), (vec![2, 1], vec![0]));
    assert_eq!(totals().0, times(1));
    // More calls count beside the folded ones, and fold into their rows.
    three_calls();
    assert_eq!(totals().1, times(2));
    store.write_blocking(catch_up::catch_up).unwrap();
    assert_eq!((rows(), waiting()), (vec![4, 2], vec![0]));
    let (total, day, _, daily) = totals();
    assert_eq!(
        (total, day, &daily[0].total),
        (times(2), times(2), &times(2))
    );
}

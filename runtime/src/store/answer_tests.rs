use super::*;

/// A waiter gets its answer whether it comes while the waiter
/// spins or after it sleeps, learns of a thread that is gone, and gives
/// the spin back when its wait is dropped.
#[tokio::test]
async fn a_waiter_gets_its_answer_and_gives_the_spin_back() {
    use futures::FutureExt;
    // Answered at once, while the waiter spins.
    let (tx, rx) = tokio::sync::oneshot::channel();
    tx.send(Ok(7)).unwrap();
    assert_eq!(wait(rx).await.unwrap(), 7);
    // Answered later than the spin lasts: by then the waiter sleeps.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let answer = tokio::spawn(async move {
        let started = std::time::Instant::now();
        while started.elapsed() < SPIN * 3 {
            tokio::task::yield_now().await;
        }
        tx.send(Ok(8)).unwrap();
    });
    assert_eq!(wait(rx).await.unwrap(), 8);
    answer.await.unwrap();
    // The thread gone.
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<()>>();
    drop(tx);
    assert!(matches!(wait(rx).await, Err(StoreError::Closed)));
    // A wait dropped while it spins lets the next waiter spin (another
    // test's waiter may hold the spin for its 100 µs meanwhile).
    let (_tx, rx) = tokio::sync::oneshot::channel::<Result<()>>();
    let mut wait = Box::pin(wait(rx));
    assert!((&mut wait).now_or_never().is_none());
    drop(wait);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while Spinner::take().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the spin was not given back"
        );
        tokio::task::yield_now().await;
    }
}

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::*;

/// `n` openers of in-memory connections, counting how many opened.
fn openers(n: usize) -> (Vec<Opener>, Arc<AtomicUsize>) {
    let opened = Arc::new(AtomicUsize::new(0));
    let openers = (0..n)
        .map(|_| {
            let opened = Arc::clone(&opened);
            Box::new(move || {
                opened.fetch_add(1, Ordering::SeqCst);
                Ok(Connection::open_in_memory()?)
            }) as Opener
        })
        .collect();
    (openers, opened)
}

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_second_reader_opens_only_when_a_read_waits_behind_another() {
    let (openers, opened) = openers(2);
    let (reads, rx) = mpsc::channel(16);
    let pool = spawn(openers, rx, None).unwrap();

    // Reads one after another: the first reader serves them all.
    for _ in 0..3 {
        let (read, answer) =
            job(|conn| Ok(conn.query_row("SELECT 1", [], |r| r.get::<_, i64>(0))?));
        reads.send(read).await.unwrap();
        pool.sent();
        assert_eq!(
            tokio::time::timeout(WAIT, answer)
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
            1
        );
    }
    assert_eq!(opened.load(Ordering::SeqCst), 1);

    // A read that holds the first reader, and one queued behind it: the
    // second reader opens and answers it while the first is still held.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, on_start) = oneshot::channel::<()>();
    let (slow, slow_answer) = job(move |_conn| {
        let _ = started.send(());
        let _ = held.recv_timeout(WAIT);
        Ok(())
    });
    reads.send(slow).await.unwrap();
    pool.sent();
    tokio::time::timeout(WAIT, on_start).await.unwrap().unwrap();
    let (quick, quick_answer) = job(|_conn| Ok(2));
    reads.send(quick).await.unwrap();
    pool.sent();
    // Queued while the first reader is busy: a third read makes the one
    // that takes the second see a read behind it too.
    let (third, third_answer) = job(|_conn| Ok(3));
    reads.send(third).await.unwrap();
    pool.sent();
    assert_eq!(
        tokio::time::timeout(WAIT, quick_answer)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        2
    );
    assert_eq!(
        tokio::time::timeout(WAIT, third_answer)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        3
    );
    assert_eq!(opened.load(Ordering::SeqCst), 2);
    release.send(()).unwrap();
    tokio::time::timeout(WAIT, slow_answer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

/// Says on `gone` when it is dropped.
struct Gone(std::sync::mpsc::Sender<()>);

impl Drop for Gone {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

#[tokio::test]
async fn readers_never_opened_stop_with_the_queue() {
    let (gone, dropped) = std::sync::mpsc::channel();
    let opened = Arc::new(AtomicUsize::new(0));
    let openers = (0..3)
        .map(|_| {
            let (opened, guard) = (Arc::clone(&opened), Gone(gone.clone()));
            Box::new(move || {
                let _guard = guard;
                opened.fetch_add(1, Ordering::SeqCst);
                Ok(Connection::open_in_memory()?)
            }) as Opener
        })
        .collect();
    drop(gone);
    let (reads, rx) = mpsc::channel(16);
    let pool = spawn(openers, rx, None).unwrap();
    let (read, answer) = job(|_conn| Ok(()));
    reads.send(read).await.unwrap();
    pool.sent();
    tokio::time::timeout(WAIT, answer)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    // The first reader's opener is spent; the two others are dropped
    // unopened when their threads stop with the queue.
    dropped.recv_timeout(WAIT).unwrap();
    drop(reads);
    for _ in 0..2 {
        dropped.recv_timeout(WAIT).unwrap();
    }
    assert_eq!(opened.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn when_the_first_reader_cannot_open_the_next_one_does() {
    let (mut openers, opened) = openers(2);
    openers[0] = Box::new(|| {
        Err(StoreError::Io {
            path: "nowhere".into(),
            source: std::io::Error::other("refused"),
        })
    });
    let (reads, rx) = mpsc::channel(16);
    let pool = spawn(openers, rx, None).unwrap();
    let (read, answer) = job(|_conn| Ok(7));
    reads.send(read).await.unwrap();
    pool.sent();
    assert_eq!(
        tokio::time::timeout(WAIT, answer)
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        7
    );
    assert_eq!(opened.load(Ordering::SeqCst), 1);
}

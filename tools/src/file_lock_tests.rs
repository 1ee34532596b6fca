use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_edits_all_land() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes").join("list.txt");
    let mut tasks = Vec::new();
    for i in 0..40 {
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            edit(&path, move |text: &str| {
                Ok::<_, String>((Some(format!("{text}{i}\n")), ()))
            })
            .await
        }));
    }
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let mut got: Vec<u32> = text.lines().map(|l| l.parse().unwrap()).collect();
    got.sort_unstable();
    assert_eq!(got, (0..40).collect::<Vec<_>>());
}

#[tokio::test]
async fn a_refused_edit_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.txt");
    std::fs::write(&path, "before").unwrap();
    let err = edit(&path, |_: &str| {
        Err::<(Option<String>, ()), _>("no".to_string())
    })
    .await
    .unwrap_err();
    assert!(
        matches!(err, EditError::Rejected(ref m) if m == "no"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "before");
}

#[tokio::test]
async fn a_foreign_write_during_an_edit_makes_it_start_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.txt");
    std::fs::write(&path, "a").unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let foreign = path.clone();
    edit(&path, move |text: &str| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            // A writer that ignores the lock gets in between.
            std::fs::write(&foreign, "a+foreign").unwrap();
        }
        Ok::<_, String>((Some(format!("{text}+mine")), ()))
    })
    .await
    .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a+foreign+mine");
}

#[tokio::test]
async fn a_writer_that_never_stops_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.txt");
    let foreign = path.clone();
    let n = Arc::new(AtomicUsize::new(0));
    let err = edit(&path, move |_: &str| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        std::fs::write(&foreign, format!("foreign {i}")).unwrap();
        Ok::<_, String>((Some("mine".into()), ()))
    })
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            EditError::Contended {
                attempts: EDIT_ATTEMPTS,
                ..
            }
        ),
        "{err}"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn the_lock_excludes_other_open_files_like_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("MEMORY.md");
    let held = lock(&target).await.unwrap();
    // flock conflicts between separate opens, as between processes.
    let other = flock_file(&lock_file_for(&target), false).unwrap();
    assert!(other.is_none(), "the lock file should be held");
    drop(held);
    let other = flock_file(&lock_file_for(&target), false).unwrap();
    assert!(other.is_some(), "released on drop");
}

#[test]
fn the_lock_file_sits_beside_its_target() {
    assert_eq!(
        lock_file_for(Path::new("/h/memory/USER.md")),
        PathBuf::from("/h/memory/.USER.md.lock")
    );
}

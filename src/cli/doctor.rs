//! `troupe doctor`: is the home's database whole, and how to get a copy
//! back if it is not.
//!
//! A start after an unclean end runs SQLite's quick check and refuses a
//! damaged database; this is where the user goes next. It runs the full
//! `PRAGMA integrity_check` and every full-text index's own check, says
//! how to recover a copy, and with `--recover FILE` makes one (`VACUUM
//! INTO`). It holds the home's lock meanwhile, so no process writes the
//! file under the checks; it changes nothing in the home. It also says
//! where commands run on this machine: sandboxed by bubblewrap, or
//! unsandboxed, and what the gate then asks.

use std::path::PathBuf;
use std::process::ExitCode;

use troupe_runtime::home::traces_of_use;
use troupe_runtime::store::health;

/// Arguments of `troupe doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Also copy what can be read into a new database at FILE (`VACUUM INTO`).
    #[arg(long, value_name = "FILE")]
    pub recover: Option<PathBuf>,
}

/// Runs `troupe doctor`.
pub async fn doctor(home: Option<PathBuf>, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut lock = super::owner::lock(home, false).await?;
    let home = lock.home().clone();
    let path = home.database();
    let outcome = tokio::task::spawn_blocking(move || {
        let missing = health::refuse_missing(&path, &traces_of_use(&home));
        let diagnosis = health::diagnose(&path);
        let copy = args
            .recover
            .map(|out| (health::recover_into(&path, &out), out));
        (path, missing, diagnosis, copy)
    })
    .await;
    let (path, missing, diagnosis, copy) = match outcome {
        Ok(found) => found,
        Err(e) => {
            super::owner::release(lock);
            anyhow::bail!(
                "the checks stopped before they finished ({e}); run `troupe doctor` again"
            );
        }
    };
    println!("troupe doctor: {}", path.display());
    println!("  commands:      {}", commands_line(lock.home()));
    let mut healthy = true;
    if let Err(e) = missing {
        healthy = false;
        println!("  database:      {e}");
    }
    match diagnosis {
        Ok(found) => {
            if found.integrity == ["ok"] {
                println!("  integrity:     ok");
            } else {
                println!("  integrity:     {} problem(s)", found.integrity.len());
                for line in found.integrity.iter().take(20) {
                    println!("    {line}");
                }
            }
            for (table, outcome) in &found.full_text {
                match outcome {
                    Ok(()) => println!("  full text {table}: ok"),
                    Err(e) => println!("  full text {table}: {e}"),
                }
            }
            healthy &= found.healthy();
        }
        Err(troupe_runtime::store::StoreError::NoDatabase { .. }) => {
            println!("  no database yet: nothing has run in this home");
        }
        Err(e) => {
            healthy = false;
            println!("  could not be checked: {e}");
        }
    }
    if let Some((made, out)) = copy {
        match made {
            Ok(()) => println!("  copied what could be read to {}", out.display()),
            Err(e) => {
                healthy = false;
                println!("  the copy failed: {e}");
            }
        }
    }
    if healthy {
        lock.mark_database_checked();
        println!("the database is whole");
    } else {
        println!("{}", recovery_steps(&path));
    }
    super::owner::release(lock);
    Ok(if healthy {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// How to get a working database back, for the file at `path`.
/// Where `run_command` runs commands on this machine, from the home's
/// `[sandbox]` settings.
fn commands_line(home: &troupe_runtime::home::Home) -> String {
    match troupe_runtime::config::Config::load(home, &|k| std::env::var(k).ok(), &[]) {
        Ok(config) => crate::gate::where_commands_run(&config.sandbox),
        Err(e) => format!("cannot tell: {e}"),
    }
}

fn recovery_steps(path: &std::path::Path) -> String {
    let db = path.display();
    format!(
        "\nTo recover, stop every troupe using this home, then make a copy of what can be read:\n\
         \x20 troupe doctor --recover recovered.db          (VACUUM INTO; stops at the first unreadable page)\n\
         \x20 sqlite3 {db} .recover | sqlite3 recovered.db  (the sqlite3 tool; gets back more of a damaged file)\n\
         Check the copy, move {db}, {db}-wal and {db}-shm aside (keep them), and put the copy in \
         place as {db}."
    )
}

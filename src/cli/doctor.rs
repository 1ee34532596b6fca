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
//! unsandboxed, and what the gate then asks; whether each model the home
//! uses can be called ([`setup`]), and whether node and npm are there.

mod setup;

use std::path::PathBuf;
use std::process::ExitCode;

use troupe_runtime::home::traces_of_use;
use troupe_runtime::store::health;

/// Arguments of `troupe doctor`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  troupe doctor                        check the database, the models, the sandbox and the tools
  troupe doctor --offline              the same without calling the models' endpoints
  troupe doctor --recover saved.db     also copy what can be read into saved.db")]
pub struct DoctorArgs {
    /// Also copy what can be read into a new database at FILE (`VACUUM INTO`).
    #[arg(long, value_name = "FILE")]
    pub recover: Option<PathBuf>,
    /// Do not call the models' endpoints (their specs and keys are still checked).
    #[arg(long)]
    pub offline: bool,
}

/// Runs `troupe doctor`.
pub async fn doctor(home: Option<PathBuf>, args: DoctorArgs) -> anyhow::Result<ExitCode> {
    let mut lock = super::owner::lock(home, false).await?;
    let home = lock.home().clone();
    let path = home.database();
    let what = match &args.recover {
        Some(out) => format!(
            "checking the database and copying what can be read into {}",
            out.display()
        ),
        None => "checking the database".to_owned(),
    };
    let on = crate::progress::wanted(false) && args.recover.is_some();
    let checks = tokio::task::spawn_blocking(move || {
        let missing = health::refuse_missing(&path, &traces_of_use(&home));
        let diagnosis = health::diagnose(&path);
        let copy = args
            .recover
            .map(|out| (health::recover_into(&path, &out), out));
        (path, missing, diagnosis, copy)
    });
    let outcome = crate::progress::during(on, &what, checks).await;
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
    for finding in setup_findings(lock.home(), args.offline).await {
        let mark = if finding.ok { "" } else { "✗ " };
        println!(
            "  {:<14} {mark}{}",
            format!("{}:", finding.label),
            finding.text
        );
    }
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

/// The models' and programs' findings: the default model, each bot's
/// own (read from the database when there is one) and models.toml's.
async fn setup_findings(home: &troupe_runtime::home::Home, offline: bool) -> Vec<setup::Finding> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let mut out = Vec::new();
    let (config, models) = match (
        troupe_runtime::config::Config::load(home, &env, &[]),
        troupe_runtime::model::ModelsConfig::load(&home.models_file()),
    ) {
        (Ok(c), Ok(m)) => (c, m),
        (Err(e), _) => {
            out.push(setup::Finding {
                label: "config".into(),
                text: e.to_string(),
                ok: false,
            });
            return out;
        }
        (_, Err(e)) => {
            out.push(setup::Finding {
                label: "models.toml".into(),
                text: e.to_string(),
                ok: false,
            });
            return out;
        }
    };
    // A damaged database is the checks' business above: no bots then.
    let bots: Vec<String> =
        match super::view::View::open(Some(home.root().to_path_buf()), &[]).await {
            Ok(view) => view
                .bots()
                .await
                .map(|all| all.into_iter().map(|b| b.spec.model.clone()).collect())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
    let specs = setup::models_in_use(&config.agent.model, &bots, &models);
    out.extend(setup::models(home, &specs, &models, &env, offline).await);
    out.extend(setup::programs().await);
    let (ok, text) = super::browser::finding(home, &config).await;
    out.push(setup::Finding {
        label: "browser".into(),
        text,
        ok,
    });
    out
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

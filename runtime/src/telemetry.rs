//! Diagnostics: one `tracing` subscriber for the process, writing to stderr
//! (or a file).
//!
//! stdout belongs to the program's output (answers, JSON for scripts), so logs
//! go to stderr or to `[log] file`, as text or as one JSON object per line
//! whose span fields (`actor.kind`, `actor.id`) and event fields
//! (`conversation`, `thread`, `bot`) are fields of the object. The filter
//! comes from `[log] filter` after layering (`TROUPE_LOG`, a flag), with
//! `RUST_LOG` over it (the binary decides); this module takes the final
//! [`LogOptions`]. Colours only where the caller says a terminal reads them.
//!
//! # Conventions
//!
//! - **A span per actor message.** An actor enters [`actor_span`] while it
//!   handles one message and records the message's variant in its `msg`
//!   field, so every event logged while handling it (model calls, tool
//!   calls, store writes) carries the actor's kind and id.
//! - **Structured fields**, not formatted text: `bot = %id, call_id = %id`.
//! - A span per turn and per tool call, nested in the actor's span.
//!
//! # Examples
//!
//! ```
//! use troupe_runtime::telemetry;
//!
//! telemetry::init("info,troupe_runtime=debug", false)?;
//! let span = telemetry::actor_span("conversation", &"conv-1");
//! let _entered = span.enter();
//! span.record("msg", "UserMessage");
//! tracing::info!(chars = 42, "message received");
//! # Ok::<(), telemetry::TelemetryError>(())
//! ```

pub mod gen_ai;

use std::fmt::Display;
use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

/// A telemetry failure.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The filter is not one `tracing` understands.
    #[error("log filter `{filter}` is not valid ({message}); use a level (error, warn, info, debug, trace) or directives such as \"info,troupe_runtime=debug\"")]
    Filter {
        /// The filter given.
        filter: String,
        /// What the parser said.
        message: String,
    },
    /// The log file could not be opened.
    #[error("cannot open the log file {}: {source}; check `[log] file`", path.display())]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another subscriber was installed before troupe's.
    #[error("another tracing subscriber is already installed: {0}")]
    Install(String),
}

/// Parses a filter such as `info,troupe_runtime=debug`. Each directive is
/// trimmed first: `EnvFilter` slices an untrimmed directive at the offsets
/// of the trimmed one, and panics when a space before it shifts them into a
/// multi-byte character (found by the `config` fuzz target).
pub(crate) fn env_filter(
    filter: &str,
) -> Result<EnvFilter, tracing_subscriber::filter::ParseError> {
    let directives: Vec<&str> = filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect();
    EnvFilter::try_new(directives.join(","))
}

/// Set once the subscriber is installed.
static INSTALLED: OnceLock<()> = OnceLock::new();

/// Where and how the process's diagnostics are written.
#[derive(Debug, Clone, PartialEq)]
pub struct LogOptions {
    /// An `EnvFilter` directive string: `warn`, `info,troupe_runtime=debug`.
    pub filter: String,
    /// One JSON object per line (span fields included) instead of text.
    pub json: bool,
    /// Appended to this file instead of written to stderr.
    pub file: Option<std::path::PathBuf>,
    /// Colours (ANSI escapes) in text lines; never in a file or JSON.
    pub ansi: bool,
}

/// Installs the process's subscriber: `filter` (an `EnvFilter` directive
/// string such as `info` or `info,troupe_runtime=debug`), JSON lines when
/// `json`, written to stderr without colours. A second call does nothing.
///
/// # Errors
///
/// As [`install`].
pub fn init(filter: &str, json: bool) -> Result<(), TelemetryError> {
    install(&LogOptions {
        filter: filter.to_owned(),
        json,
        file: None,
        ansi: false,
    })
}

/// A layer the binary adds beside the log (metrics, traces), with its own
/// per-layer filter: the log's filter does not narrow it.
pub type ExtraLayer =
    Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Installs the process's subscriber as `options` say. A second call does
/// nothing.
///
/// # Errors
///
/// [`TelemetryError::Filter`] if the filter does not parse (checked on
/// every call); [`TelemetryError::File`] if the log file cannot be opened;
/// [`TelemetryError::Install`] if another subscriber was installed first by
/// someone else.
pub fn install(options: &LogOptions) -> Result<(), TelemetryError> {
    install_with(options, Vec::new())
}

/// [`install`], with `extra` layers beside the log (each filtering for
/// itself, e.g. on [`gen_ai::TARGET`]). Without any, the log's filter is
/// the subscriber's global filter, as it always was; with some, it filters
/// the log's layer only.
///
/// # Errors
///
/// As [`install`].
pub fn install_with(options: &LogOptions, extra: Vec<ExtraLayer>) -> Result<(), TelemetryError> {
    use tracing_subscriber::fmt::writer::BoxMakeWriter;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    let env_filter = env_filter(&options.filter).map_err(|error| TelemetryError::Filter {
        filter: options.filter.clone(),
        message: error.to_string(),
    })?;
    if INSTALLED.get().is_some() {
        return Ok(());
    }
    let (writer, ansi) = match &options.file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| TelemetryError::File {
                    path: path.clone(),
                    source,
                })?;
            (BoxMakeWriter::new(std::sync::Mutex::new(file)), false)
        }
        None => (BoxMakeWriter::new(std::io::stderr), options.ansi),
    };
    let mut result = Ok(());
    INSTALLED.get_or_init(|| {
        let installed = if extra.is_empty() {
            let builder = tracing_subscriber::fmt()
                .with_env_filter(env_filter)
                .with_writer(writer);
            if options.json {
                builder
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .try_init()
            } else {
                builder.with_ansi(ansi).try_init()
            }
        } else {
            let log = tracing_subscriber::fmt::layer().with_writer(writer);
            let log = if options.json {
                log.json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_span_list(false)
                    .boxed()
            } else {
                log.with_ansi(ansi).boxed()
            };
            tracing_subscriber::registry()
                .with(extra)
                .with(log.with_filter(env_filter))
                .try_init()
                .map_err(Into::into)
        };
        if let Err(error) = installed {
            result = Err(TelemetryError::Install(error.to_string()));
        }
    });
    result
}

/// The span an actor enters while it handles one message: `kind` names the
/// actor (`conversation`, `bot`, `router`, …), `id` is its id; `msg` is left
/// empty for the handler to record the message's variant.
pub fn actor_span(kind: &str, id: &dyn Display) -> tracing::Span {
    tracing::info_span!(
        "actor",
        actor.kind = kind,
        actor.id = %id,
        msg = tracing::field::Empty
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_is_refused_with_what_to_write() {
        let error = init("info,troupe=loud", false).err();
        let text = error.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.starts_with("log filter `info,troupe=loud` is not valid"),
            "{text}"
        );
        assert!(text.contains("use a level"), "{text}");
    }

    #[test]
    fn init_twice_is_a_no_op() {
        assert!(init("warn", false).is_ok());
        assert!(init("debug", true).is_ok());
    }

    #[test]
    fn actor_span_carries_kind_id_and_a_msg_slot() {
        let subscriber = tracing_subscriber::registry();
        let fields = tracing::subscriber::with_default(subscriber, || {
            let span = actor_span("bot", &"scout");
            span.metadata().map(|m| {
                m.fields()
                    .iter()
                    .map(|f| f.name().to_owned())
                    .collect::<Vec<_>>()
            })
        });
        assert_eq!(
            fields,
            Some(vec![
                "actor.kind".to_owned(),
                "actor.id".to_owned(),
                "msg".to_owned()
            ])
        );
    }
}

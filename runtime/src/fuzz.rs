//! Fuzz targets for the runtime's parsers of outside input: the SSE framing
//! and both providers' stream dialects (a server's bytes), `config.toml` and
//! its layers, `models.toml`, the scripted-model file, and the trust gate's
//! shell parser and analysis (a model's command).
//!
//! Each target takes any bytes and must not panic, hang or abort; some also
//! check a property (SSE events do not depend on where the network split the
//! bytes). Each has a raw test (the committed corpus in
//! `src/__fuzz__/NAME/corpus/`, then random bytes; coverage-guided under
//! `cargo bolero`) and an `_edits` test (random edits of those seeds). How
//! to run them for long: `docs/testing.md`.

use std::path::Path;

use bolero::check;
use troupe_fuzzing::Seeds;

use crate::config::Config;
use crate::model::anthropic::AnthropicDecoder;
use crate::model::http::Decoder;
use crate::model::openai::OpenAiDecoder;
use crate::model::scripted::ScriptedProvider;
use crate::model::spec::ModelsConfig;
use crate::model::sse::{SseEvent, SseParser};
use crate::trust::inspect::{analyse, Env, Limits};
use crate::trust::{RuleSet, Tier};

/// The seeds of target `name`, with the tokens its edits insert.
fn seeds(name: &str, tokens: &[&[u8]]) -> Seeds {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__");
    Seeds::load(dir.join(name).join("corpus"), tokens)
}

/// The bytes as a network would hand them over: split into pieces whose
/// size the first byte chooses.
fn sse_events(data: &[u8]) -> Vec<SseEvent> {
    let (size, body) = match data.split_first() {
        Some((first, rest)) => (usize::from(*first % 32) + 1, rest),
        None => (1, data),
    };
    let mut parser = SseParser::new();
    let mut events = Vec::new();
    for piece in body.chunks(size) {
        events.extend(parser.push(piece));
    }
    events.extend(parser.finish());
    events
}

/// SSE framing: the events do not depend on how the bytes were split.
fn sse(data: &[u8]) {
    let pieces = sse_events(data);
    let body = data.get(1..).unwrap_or_default();
    let mut parser = SseParser::new();
    let mut whole = parser.push(body);
    whole.extend(parser.finish());
    assert_eq!(
        pieces, whole,
        "the events depend on where the bytes were split"
    );
}

/// A provider's stream, decoded as the HTTP loop does: events until the end
/// marker or an error, then the end of the body.
fn stream(data: &[u8], mut decoder: impl Decoder) {
    for event in sse_events(data) {
        if decoder.is_done() {
            return;
        }
        if decoder.event(&event).is_err() {
            return;
        }
    }
    if !decoder.is_done() {
        let _ = decoder.at_end();
    }
}

fn openai_stream(data: &[u8]) {
    stream(data, OpenAiDecoder::new("openai"));
}

fn anthropic_stream(data: &[u8]) {
    stream(data, AnthropicDecoder::new("anthropic"));
}

/// `config.toml`, then an override: the text before a NUL byte is the file,
/// the text after it one `key=value` override.
fn config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (file, flag) = text.split_once('\0').unwrap_or((&text, ""));
    let overrides: Vec<(String, String)> = flag
        .split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into_iter()
        .collect();
    let path = Path::new("/home/user/.troupe/config.toml");
    if let Err(error) = Config::from_layers(path, Some(file), &|_| None, &overrides) {
        // Every error names what was wrong; building the message must not panic.
        assert!(!error.to_string().is_empty());
    }
}

fn models(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(models) = ModelsConfig::parse(&text, Path::new("models.toml")) {
        for def in models.models.values() {
            let _ = format!("{def:?}");
        }
    }
}

fn scripted(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = ScriptedProvider::parse(&text, "script.json");
}

/// The gate's analysis of a command and every built-in rule over it.
fn shell(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let env = Env::example();
    let limits = Limits {
        read_scripts: false,
        ..Limits::default()
    };
    let Ok(analysis) = analyse(&text, &env, &limits) else {
        return;
    };
    let rules = rules();
    for tier in [
        Tier::Hardline,
        Tier::Outside,
        Tier::Unanalysable,
        Tier::Dangerous,
    ] {
        rules.hits(tier, &analysis, &env);
    }
}

fn rules() -> &'static RuleSet {
    static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
    #[allow(clippy::expect_used)]
    RULES.get_or_init(|| RuleSet::builtin().expect("the built-in rules compile"))
}

const SSE_TOKENS: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\n\n",
    b"data: ",
    b"event: ",
    b": ping\n",
    b"data: [DONE]\n\n",
    b"\xc3",
    b"\xe2\x82",
];
const JSON_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"-1",
    b"1e400",
    b"\"\\u",
    b"18446744073709551616",
    b"\"index\":",
    b"\"arguments\":\"{",
    b"\"type\":",
];
const TOML_TOKENS: &[&[u8]] = &[
    b"\n[",
    b"]\n",
    b"[[",
    b"=",
    b"\"",
    b"'''",
    b"\"\"\"",
    b"#",
    b"\n",
    b".",
    b"1979-05-27T07:32:00Z",
    b"-1",
    b"9223372036854775808",
    b"inf",
    b"nan",
    b"{",
    b"}",
    b"\0",
];
const SHELL_TOKENS: &[&[u8]] = &[
    b"$(", b")", b"`", b"'", b"\"", b"\\", b";", b"&&", b"||", b"|", b">", b">>", b"<<EOF\n",
    b"\nEOF\n", b"<(", b"${", b"}", b"~/", b"../", b"sh -c ", b"eval ", b"(", b"{ ", b"f() ", b"*",
    b"$HOME", b"\n", b"#", b"2>&1", b"&", b"=",
];

#[test]
fn fuzz_sse() {
    check!(name = "sse").for_each(sse);
}

#[test]
fn fuzz_sse_edits() {
    let seeds = seeds("sse", SSE_TOKENS);
    check!(name = "sse_edits").for_each(|script| sse(&seeds.edited(script)));
}

#[test]
fn fuzz_openai_stream() {
    check!(name = "openai_stream").for_each(openai_stream);
}

#[test]
fn fuzz_openai_stream_edits() {
    let tokens = [SSE_TOKENS, JSON_TOKENS].concat();
    let seeds = seeds("openai_stream", &tokens);
    check!(name = "openai_stream_edits").for_each(|script| openai_stream(&seeds.edited(script)));
}

#[test]
fn fuzz_anthropic_stream() {
    check!(name = "anthropic_stream").for_each(anthropic_stream);
}

#[test]
fn fuzz_anthropic_stream_edits() {
    let tokens = [SSE_TOKENS, JSON_TOKENS].concat();
    let seeds = seeds("anthropic_stream", &tokens);
    check!(name = "anthropic_stream_edits")
        .for_each(|script| anthropic_stream(&seeds.edited(script)));
}

#[test]
fn fuzz_config() {
    check!(name = "config").for_each(config);
}

#[test]
fn fuzz_config_edits() {
    let seeds = seeds("config", TOML_TOKENS);
    check!(name = "config_edits").for_each(|script| config(&seeds.edited(script)));
}

#[test]
fn fuzz_models() {
    check!(name = "models").for_each(models);
}

#[test]
fn fuzz_models_edits() {
    let seeds = seeds("models", TOML_TOKENS);
    check!(name = "models_edits").for_each(|script| models(&seeds.edited(script)));
}

#[test]
fn fuzz_scripted() {
    check!(name = "scripted").for_each(scripted);
}

#[test]
fn fuzz_scripted_edits() {
    let seeds = seeds("scripted", JSON_TOKENS);
    check!(name = "scripted_edits").for_each(|script| scripted(&seeds.edited(script)));
}

#[test]
fn fuzz_shell() {
    check!(name = "shell").for_each(shell);
}

#[test]
fn fuzz_shell_edits() {
    let seeds = seeds("shell", SHELL_TOKENS);
    check!(name = "shell_edits").for_each(|script| shell(&seeds.edited(script)));
}

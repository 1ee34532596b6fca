//! Step 4 of the gate, the guardian, and the approvals that outlive a call.
//! Ask mode's gates here run commands in a sandbox: without one, ask mode
//! asks the user before the guardian is reached (`read_only.rs`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use pretty_assertions::assert_eq;

use super::*;

/// A guardian answering from a list, counting its calls.
#[derive(Default)]
struct Scripted {
    answers: Mutex<VecDeque<Result<GuardianAnswer, String>>>,
    calls: AtomicUsize,
}

impl Scripted {
    fn new(answers: Vec<Result<GuardianAnswer, String>>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            calls: AtomicUsize::new(0),
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Guardian for Scripted {
    async fn judge(&self, _request: &GuardianRequest) -> Result<GuardianAnswer, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.answers
            .lock()
            .pop_front()
            .unwrap_or_else(|| Err("no more answers".into()))
    }
}

/// A guardian that never answers.
struct Silent;

#[async_trait::async_trait]
impl Guardian for Silent {
    async fn judge(&self, _request: &GuardianRequest) -> Result<GuardianAnswer, String> {
        std::future::pending().await
    }
}

fn refuse(reason: &str) -> Result<GuardianAnswer, String> {
    Ok(GuardianAnswer::Deny {
        reason: reason.into(),
    })
}

const RM_BUILD: &str = "`rm -rf build` (it deletes a folder and everything in it)";

#[tokio::test]
async fn the_guardian_approves_denies_or_asks() {
    let f = fixture();
    let guardian = Scripted::new(vec![
        Ok(GuardianAnswer::Approve),
        refuse("build holds the only copy of the release"),
        Ok(GuardianAnswer::Ask {
            reason: "it is not clear the user wants this".into(),
        }),
    ]);
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(guardian.clone());
    assert_eq!(check(&gate, &f.ctx, "rm -rf build").await, Verdict::Allow);
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        deny(
            "guardian",
            &format!(
                "The guardian refused {RM_BUILD}: build holds the only copy of the release. Do \
                 it another way; the user can allow such commands with an allow pattern or auto \
                 mode."
            )
        )
    );
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        ask(&format!(
            "The guardian wants the user to decide on {RM_BUILD}: it is not clear the user wants \
             this."
        ))
    );
    assert_eq!(check(&gate, &f.ctx, "ls -la").await, Verdict::Allow);
    assert_eq!(guardian.calls(), 3, "harmless commands never reach it");
}

#[tokio::test]
async fn auto_mode_skips_the_guardian_only() {
    let f = fixture();
    let guardian = Scripted::new(vec![refuse("no")]);
    let gate = gate(GateMode::Auto).with_guardian(guardian.clone());
    assert_eq!(check(&gate, &f.ctx, "rm -rf build").await, Verdict::Allow);
    assert_eq!(
        check(&gate, &f.ctx, "git push --force").await,
        Verdict::Allow
    );
    assert!(matches!(
        check(&gate, &f.ctx, "rm -rf /").await,
        Verdict::Deny { .. }
    ));
    assert!(matches!(
        check(&gate, &f.ctx, "gh repo delete me/x").await,
        Verdict::Ask { .. }
    ));
    assert_eq!(guardian.calls(), 0);
}

#[tokio::test]
async fn the_allow_list_spares_the_guardian_but_only_for_what_it_covers() {
    let f = fixture();
    let guardian = Scripted::new(vec![refuse("no"), refuse("no")]);
    let gate = Gate::new(&GatePolicy {
        allow: vec!["rm -rf build".into()],
        ..GatePolicy::default()
    })
    .unwrap()
    .with_sandbox(true)
    .with_guardian(guardian.clone());
    assert_eq!(check(&gate, &f.ctx, "rm -rf build").await, Verdict::Allow);
    assert!(matches!(
        check(&gate, &f.ctx, "rm -rf build && git reset --hard").await,
        Verdict::Deny { rule, .. } if rule == "guardian"
    ));
    assert_eq!(guardian.calls(), 1);
}

#[tokio::test]
async fn a_guardian_error_asks_the_user() {
    let f = fixture();
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(Scripted::new(vec![Err("connection refused".into())]));
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        ask(&format!(
            "The guardian could not judge {RM_BUILD}: connection refused. The user decides \
             instead."
        ))
    );
}

#[tokio::test]
async fn a_guardian_error_refuses_when_unattended() {
    let f = fixture();
    let ctx = f.ctx.clone().unattended(true);
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(Scripted::new(vec![Err("HTTP 500".into())]));
    assert_eq!(
        check(&gate, &ctx, "rm -rf build").await,
        deny(
            "guardian-failed",
            &format!(
                "The guardian could not judge {RM_BUILD}: HTTP 500. The user decides \
                 instead.{UNATTENDED}"
            )
        )
    );
}

#[tokio::test]
async fn a_guardian_that_does_not_answer_in_time_asks_the_user() {
    let f = fixture();
    let mut policy = GatePolicy::default();
    policy.limits.guardian_timeout_secs = 1;
    let gate = Gate::new(&policy)
        .unwrap()
        .with_sandbox(true)
        .with_guardian(Arc::new(Silent));
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        ask(&format!(
            "The guardian could not judge {RM_BUILD}: it did not answer within 1 s. The user \
             decides instead."
        ))
    );
}

/// A provider that streams one fixed text.
struct FixedText(&'static str);

#[async_trait::async_trait]
impl Provider for FixedText {
    fn name(&self) -> &str {
        "fixed"
    }

    async fn stream(&self, _request: ModelRequest) -> Result<ModelStream, ModelError> {
        let events = vec![
            Ok(ModelEvent::TextDelta {
                text: self.0.to_string(),
            }),
            Ok(ModelEvent::Stop {
                reason: StopReason::EndTurn,
            }),
        ];
        Ok(Box::pin(futures::stream::iter(events)))
    }
}

#[tokio::test]
async fn a_model_guardian_with_a_malformed_answer_asks_the_user() {
    let f = fixture();
    let guardian = ModelGuardian::new(Arc::new(FixedText("Probably fine, I think.")), "m");
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(Arc::new(guardian));
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        ask(&format!(
            "The guardian could not judge {RM_BUILD}: its answer `Probably fine, I think.` is \
             none of approve, deny or ask. The user decides instead."
        ))
    );
}

#[tokio::test]
async fn a_model_guardian_reads_json_answers() {
    let f = fixture();
    let guardian = ModelGuardian::new(
        Arc::new(FixedText(
            "```json\n{\"decision\": \"deny\", \"reason\": \"it wipes the cache others use\"}\n```",
        )),
        "m",
    );
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(Arc::new(guardian));
    assert!(matches!(
        check(&gate, &f.ctx, "rm -rf build").await,
        Verdict::Deny { rule, reason } if rule == "guardian" && reason.contains("it wipes the cache others use")
    ));
}

#[test]
fn guardian_answers_parse_from_a_word_or_json() {
    assert_eq!(parse_answer("APPROVE"), Ok(GuardianAnswer::Approve));
    assert_eq!(
        parse_answer("deny: it deletes the repo"),
        Ok(GuardianAnswer::Deny {
            reason: "it deletes the repo".into()
        })
    );
    assert_eq!(
        parse_answer("{\"decision\":\"ask\"}"),
        Ok(GuardianAnswer::Ask {
            reason: "no reason given".into()
        })
    );
    assert!(parse_answer("").is_err());
    assert!(parse_answer("{\"decision\": 3}").is_err());
    assert!(parse_answer("sure").is_err());
}

#[tokio::test]
async fn after_repeated_refusals_the_guardian_is_no_longer_asked() {
    let f = fixture();
    let guardian = Scripted::new(vec![
        refuse("a"),
        refuse("b"),
        refuse("c"),
        Ok(GuardianAnswer::Approve),
    ]);
    let gate = gate(GateMode::Ask)
        .with_sandbox(true)
        .with_guardian(guardian.clone());
    for _ in 0..3 {
        assert!(matches!(
            check(&gate, &f.ctx, "rm -rf build").await,
            Verdict::Deny { rule, .. } if rule == "guardian"
        ));
    }
    assert_eq!(
        check(&gate, &f.ctx, "rm -rf build").await,
        deny(
            "guardian-streak",
            &format!(
                "Blocked {RM_BUILD}: the guardian refused the last 3 risky commands in a row, so \
                 risky commands are refused without asking it for the rest of this session. \
                 Change approach; the user can allow such commands with an allow pattern or auto \
                 mode."
            )
        )
    );
    assert_eq!(guardian.calls(), 3);
    // Another conversation has its own record.
    let other = GateContext::new(f.ctx.home.clone(), &f.user_home, &f.ctx.cwd);
    assert_eq!(check(&gate, &other, "rm -rf build").await, Verdict::Allow);
}

#[tokio::test]
async fn without_a_guardian_risky_commands_ask_and_session_approvals_hold() {
    let f = fixture();
    let gate = gate(GateMode::Ask).with_sandbox(true);
    let expected = ask(&format!(
        "{RM_BUILD} matches the dangerous pattern `rm-recursive`. The user decides; auto mode or \
         an allow pattern would let such commands run without asking."
    ));
    assert_eq!(check(&gate, &f.ctx, "rm -rf build").await, expected);
    gate.remember(
        &run_command(),
        &command("rm -rf build"),
        &f.ctx,
        ApprovalAnswer::Session,
    )
    .unwrap();
    assert_eq!(check(&gate, &f.ctx, "rm -rf build").await, Verdict::Allow);
    let other = GateContext::new(f.ctx.home.clone(), &f.user_home, &f.ctx.cwd);
    assert_eq!(check(&gate, &other, "rm -rf build").await, expected);
}

#[tokio::test]
async fn always_approvals_are_kept_in_the_home() {
    let f = fixture();
    let store = Arc::new(FileApprovals::open(&f.ctx.home).unwrap());
    let gate = gate(GateMode::Ask).with_sandbox(true).with_approvals(store);
    gate.remember(
        &run_command(),
        &command("git reset --hard"),
        &f.ctx,
        ApprovalAnswer::Always,
    )
    .unwrap();
    let reopened = Arc::new(FileApprovals::open(&f.ctx.home).unwrap());
    let gate = self::gate(GateMode::Ask)
        .with_sandbox(true)
        .with_approvals(reopened);
    let fresh = GateContext::new(f.ctx.home.clone(), &f.user_home, &f.ctx.cwd);
    assert_eq!(
        check(&gate, &fresh, "git reset --hard").await,
        Verdict::Allow
    );
    assert!(matches!(
        check(&gate, &fresh, "git reset --hard HEAD~1").await,
        Verdict::Ask { .. }
    ));
}

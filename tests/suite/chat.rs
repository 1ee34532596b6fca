//! `troupe chat` through a pseudo-terminal (util-linux `script`), as a
//! person types: an `ask_user` question answered at the prompt, Ctrl-C
//! stopping a turn while the program goes on, the spinner of a running
//! tool, history recalled with ↑ in a later session, Tab completing a
//! command.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::support::TestHome;

/// A chat session in a pseudo-terminal, read line by line on a thread.
struct Terminal {
    child: std::process::Child,
    /// The working folder: outside the home, where sandboxed commands may run.
    _work: tempfile::TempDir,
    input: std::process::ChildStdin,
    output: mpsc::Receiver<String>,
    seen: String,
}

impl Terminal {
    fn start(home: &TestHome, model: &str) -> Self {
        let command = format!(
            // `exec`: whatever `/bin/sh` is, the ^C goes to troupe alone,
            // not to a shell left waiting between `script` and troupe.
            "exec {} --home {} chat --model {model}",
            env!("CARGO_BIN_EXE_troupe"),
            home.path().display()
        );
        let work = tempfile::tempdir().unwrap();
        let mut child = Command::new("script")
            .args(["-qfec", &command, "/dev/null"])
            .current_dir(work.path())
            .env_remove("TROUPE_HOME")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("util-linux `script` runs");
        let input = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, output) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0
                    || tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        Self {
            child,
            _work: work,
            input,
            output,
            seen: String::new(),
        }
    }

    /// Waits until the screen shows `text` (after what was already waited for).
    fn expect(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(at) = self.seen.find(text) {
                self.seen.drain(..at + text.len());
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(chunk) => self.seen.push_str(&chunk),
                Err(_) => panic!("`{text}` never showed; the screen had:\n{}", self.seen),
            }
        }
    }

    fn send(&mut self, bytes: &str) {
        self.input.write_all(bytes.as_bytes()).unwrap();
        self.input.flush().unwrap();
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn chat_answers_questions_inline_and_ctrl_c_stops_only_the_turn() {
    let home = TestHome::new();
    let script = home.path().join("chat.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"tool_calls": [{"name": "ask_user", "arguments": {"questions": [{"question": "Tea or coffee?", "choices": ["tea", "coffee"]}]}}]},
            {"text": "Tea it is.", "expect": "tea"},
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 30"}}]},
            {"text": "Still here after the stop."}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut term = Terminal::start(&home, &format!("script:{}", script.display()));
    term.expect("> ");
    term.send("\x03");
    term.expect("no turn is running");
    term.expect("> ");
    term.send("what should I drink?\r");
    term.expect("? Tea or coffee?");
    term.expect("answer: ");
    term.send("1\r");
    term.expect("Tea it is.");
    term.expect("> ");
    term.send("wait a while\r");
    term.expect("→ run_command");
    // The spinner, with the tool's name, while it runs.
    term.expect("running run_command");
    term.send("\x03");
    term.expect("troupe: the turn was stopped");
    term.expect("> ");
    term.send("are you there?\r");
    term.expect("Still here after the stop.");
    term.send("/quit\r");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "chat left with {status}");
}

#[test]
fn chat_history_is_recalled_in_a_later_session_and_tab_completes_commands() {
    let home = TestHome::new();
    let script = |name: &str, answer: &str| {
        let path = home.path().join(name);
        std::fs::write(
            &path,
            json!({"turns": [{"text": answer, "expect": "remember the tent"}]}).to_string(),
        )
        .unwrap();
        format!("script:{}", path.display())
    };
    let (first, second) = (
        script("first.json", "First answer."),
        script("second.json", "Recalled."),
    );
    let mut term = Terminal::start(&home, &first);
    term.expect("> ");
    term.send("remember the tent\r");
    term.expect("First answer.");
    term.expect("tokens in");
    term.expect("> ");
    // Tab completes `/he` to `/help`, answered here.
    term.send("/he\t\r");
    term.expect("Commands (answered here, never sent to the model)");
    term.expect("> ");
    term.send("/quit\r");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "chat left with {status}");
    let history = std::fs::read_to_string(home.path().join("chat_history")).unwrap();
    assert!(history.contains("remember the tent"), "{history}");

    // A new session: three ↑ go back past /quit and /help to the message.
    let mut term = Terminal::start(&home, &second);
    term.expect("> ");
    term.send("\x1b[A\x1b[A\x1b[A");
    term.expect("remember the tent");
    term.send("\r");
    term.expect("Recalled.");
    term.expect("> ");
    term.send("\x04");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "chat left with {status}");
}

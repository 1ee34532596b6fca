//! Commands the gate cannot read: asked, never run unchecked.
//!
//! The gate judges what a command runs by reading it. Some commands hide
//! that until they run: a program whose name is computed (`$(printf 'rm')
//! -rf /`, `R='rm -rf'; $R /`), text decoded and piped to a shell (`echo … |
//! base64 -d | sh`), `eval` or `sh -c` of generated text, and code handed
//! inline to an interpreter (`python3 -c "…shutil.rmtree('/')"`, `perl -e`,
//! here-documents into `python3`). Any of them can be `rm -rf /` in disguise,
//! so none is approved by auto mode, an allow pattern or a remembered
//! answer: the gate gives the distinct verdict
//! [`Unanalysable`](super::Verdict::Unanalysable). Today the user is asked
//! in every mode (refused when nobody can answer); once commands can run in
//! a sandbox, auto mode will run these there instead of asking.
//!
//! Code fetched from outside the machine (`curl … | sh`) is not here: it is
//! an outside-the-machine rule ([`outside`](super::outside)), asked every
//! time, and never sandboxed into running unasked.

use super::inspect::{Env, Invocation, Opaque};
use super::rules::{Rule, RuleError, Tier};

fn computed_program(inv: &Invocation, _env: &Env) -> bool {
    inv.opaque == Some(Opaque::ComputedProgram)
}

fn generated_code(inv: &Invocation, _env: &Env) -> bool {
    inv.opaque == Some(Opaque::GeneratedCode)
}

fn inline_code(inv: &Invocation, _env: &Env) -> bool {
    inv.opaque == Some(Opaque::InlineCode)
}

/// The rules for commands the gate cannot read.
pub fn rules() -> Result<Vec<Rule>, RuleError> {
    let t = Tier::Unanalysable;
    Ok(vec![
        Rule::invocation(
            "computed-program",
            t,
            "runs a program whose name is computed only when it runs, so the gate cannot tell \
             what it is",
            computed_program,
        )
        .matching(&[
            "$(printf 'rm') -rf /",
            "$(printf '\\x72\\x6d') -rf /tmp/x",
            "R='rm -rf'; $R /tmp/x",
            "a=r; b=m; $a$b -rf /tmp/x",
            "`echo rm` -rf /tmp/x",
            "sudo \"$CMD\" /tmp/x",
            "\"${TOOL}\" --version",
        ])
        .passing(&[
            "rm -rf ./build",
            "\"$DIR\"/run.sh",
            "$HOME/.cargo/bin/cargo build",
            "echo $(printf rm)",
            "X=$(date) ls",
        ]),
        Rule::invocation(
            "generated-code",
            t,
            "runs code generated only when it runs (decoded, computed or read from a pipe), so \
             the gate cannot read it",
            generated_code,
        )
        .matching(&[
            "echo cm0gLXJmIC8= | base64 -d | sh",
            "sh -c \"$(echo cm0gLXJmIC8= | base64 -d)\"",
            "eval \"$CMD\"",
            "eval $(printf 'rm -rf /tmp/x')",
            "source <(kubectl completion bash)",
            ". \"$SCRIPT\"",
            "xxd -r -p payload.hex | bash",
            "cat script.sh | sh",
        ])
        .passing(&[
            "echo ls | sh",
            "bash -c 'ls -la'",
            "eval ls",
            "base64 -d data.b64 > data.bin",
        ]),
        Rule::invocation(
            "inline-code",
            t,
            "gives an interpreter its code inline or on its input, code the gate does not read",
            inline_code,
        )
        .matching(&[
            "python3 -c \"import shutil; shutil.rmtree('/')\"",
            "python -c 'import shutil; shutil.rmtree(chr(47))'",
            "python3 - <<EOF\nprint(1)\nEOF",
            "python3 <<< 'print(1)'",
            "echo 'print(1)' | python3",
            "perl -MFile::Path -e 'remove_tree(\"/\")'",
            "perl -E 'say 1'",
            "perl -lane 'print $F[0]' x.txt",
            "perl -MPOSIX x.pl",
            "ruby -e 'puts 1'",
            "node -e 'require(\"fs\").rmSync(\"/\", {recursive: true})'",
            "node -p 1+1",
            "nodejs --eval 'x'",
            "php -r 'echo 1;'",
            "/usr/bin/python3.12 -Bc 'print(1)'",
            "sudo python3 -c 'print(1)'",
            "lua -e 'print(1)'",
        ])
        .passing(&[
            "python3 manage.py test",
            "python3 -m pytest -x",
            "python -m pip list",
            "perl -I/usr/share/perl5 script.pl",
            "node server.js",
            "ruby -Ilib app.rb",
            "php artisan migrate",
            "python3 --version",
            "echo python3 -c x",
        ]),
    ])
}

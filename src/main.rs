//! The `troupe` command: a local supervisor for LLM agents.

use std::process::ExitCode;

use clap::Parser;

// Thousands of conversations allocate many small, short-lived blocks from
// every worker thread; mimalloc keeps that fast and the footprint flat
// (`troupe bench w3`: see the README's benchmark section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // `troupe tools | head` closes the pipe early: that is the reader's
    // choice, not a crash.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info.to_string();
        if text.contains("Broken pipe") || text.contains("os error 32") {
            std::process::exit(0);
        }
        default_hook(info);
    }));
    let cli = troupe::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(troupe::cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", troupe::cli::describe(&e));
            ExitCode::FAILURE
        }
    }
}

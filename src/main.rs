//! The `troupe` command: a local supervisor for LLM agents.

use std::process::ExitCode;

use clap::Parser;

mod idle_heap;
mod park;

// Thousands of conversations allocate many small, short-lived blocks from
// every worker thread; mimalloc keeps that fast and the footprint flat
// (`troupe bench w3`: see the README's benchmark section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // An environment's command passes through the hidden sandbox helper,
    // which must stay single-threaded: it runs before anything else.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| a == troupe_runtime::sandbox::helper::SUBCOMMAND)
    {
        let code = troupe_runtime::sandbox::helper::main(args.collect());
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Err(e) = idle_heap::start() {
        // Memory is still given back, only later (mimalloc's own delay).
        eprintln!("warning: could not start the heap keeper thread: {e}");
    }
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
        .on_thread_park(park::on_park)
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
            ExitCode::from(troupe::cli::exit::for_error(&e))
        }
    }
}

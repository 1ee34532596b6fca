//! The `troupe` command: a local supervisor for LLM agents.

use std::process::ExitCode;

use clap::Parser;

// Thousands of conversations allocate many small, short-lived blocks from
// every worker thread; mimalloc keeps that fast and the footprint flat
// (`troupe bench w3`: see the README's benchmark section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in `mimalloc.h` (v2 and v3 alike); the Rust
/// binding names the options around it but not this one.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Returns freed memory to the system after 1 ms instead of mimalloc v3's
/// 1 s: after a burst (a thousand agents each taking a turn) the process
/// gives back what the burst freed (`troupe bench w3`: +38 → +22–27 MiB)
/// at no measurable cost per turn.
#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: `mi_option_set` stores a value in mimalloc's option table,
    // which any thread may do at any time; the value is a valid delay.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1) };
}

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
    tune_allocator();
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

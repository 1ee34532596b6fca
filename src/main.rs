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

/// Returns freed memory to the system at once instead of after mimalloc
/// v3's delay (1 s, ten times that for an arena's pages): with
/// [`collect_when_idle`], what a burst (a thousand agents each taking a
/// turn) freed goes back as soon as the workers are idle (`troupe bench
/// w3`: +27–37 → +21–26 MiB settled). It costs the burst itself about 15%
/// of its wall time (pages given back and faulted in again within it) and
/// nothing measurable per turn; a delay of 1 ms kept the burst's speed but
/// left up to +31 MiB, the purges waiting for the workers' next task.
#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: `mi_option_set` stores a value in mimalloc's option table,
    // which any thread may do at any time; the value is a valid delay.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Run when a worker thread of the async runtime runs out of work: gives
/// back the pages its heap has free. Blocks that other threads free are
/// only merged into their owner's pages when the owner allocates again, so
/// a worker left idle after a burst (a thousand agents each taking a turn)
/// would keep the burst's memory until its next task. A collection walks
/// the thread's pages that are not full: microseconds, at a park.
#[allow(unsafe_code)]
fn collect_when_idle() {
    // SAFETY: `mi_collect` only reorganises the calling thread's own heap
    // and the process's arenas; any thread may call it at any time.
    unsafe { libmimalloc_sys::mi_collect(false) };
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
        .on_thread_park(collect_when_idle)
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

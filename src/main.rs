//! The `troupe` command.

fn main() {
    println!("troupe {}", env!("CARGO_PKG_VERSION"));
}

//! Link options for the release binary only (BENCHMARKS.md, "Release binary size"): the
//! linker is LLD, Rust's default on x86_64 Linux.
//! - `-z pack-relative-relocs` (DT_RELR) packs the ~49,000 load-time relocations of the
//!   position-independent executable into a bitmap: the binary keeps address-space
//!   randomisation and sheds a megabyte. It needs glibc 2.36 or later (Debian 12, the image's
//!   distroless base).
//! - `--icf=all` folds functions whose machine code is identical (generic code instantiated
//!   for types of the same layout).
//! - `-O2` lets LLD merge strings that are the tail of another string.
//! - No `.eh_frame` (0.98 MiB with its index): the release profile aborts on panic, so nothing
//!   unwinds; the tables served only stack walks. A panic still logs its file:line and exits 70
//!   (`sloburn::exit::exit_on_panic`); what goes is the frame list under `RUST_BACKTRACE` and
//!   a debugger's or profiler's unwinding of a release binary. For those, build with
//!   `SLOBURN_UNWIND_TABLES=1 cargo build --release`, which keeps the tables.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SLOBURN_UNWIND_TABLES");
    println!("cargo:rerun-if-env-changed=CARGO_PROFILE_RELEASE_PANIC");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    // Cargo.toml's release profile aborts; cargo tells build scripts the target's default
    // (`CARGO_CFG_PANIC` is "unwind" there), so only an override in the environment is seen.
    let aborts = std::env::var("CARGO_PROFILE_RELEASE_PANIC").map_or(true, |p| p == "abort");
    if release && linux {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
        println!("cargo:rustc-link-arg-bins=-Wl,-O2");
        if aborts && std::env::var_os("SLOBURN_UNWIND_TABLES").is_none() {
            discard_unwind_tables();
        }
    }
}

/// A linker script that adds to the default layout (`INSERT`) instead of replacing it: every
/// input `.eh_frame` is dropped. Written to OUT_DIR, so the build needs no file beside build.rs.
fn discard_unwind_tables() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let script = out.join("no-unwind-tables.ld");
    std::fs::write(
        &script,
        "SECTIONS { /DISCARD/ : { *(.eh_frame) } } INSERT AFTER .text;\n",
    )
    .expect("OUT_DIR is writable");
    println!("cargo:rustc-link-arg-bins=-Wl,-T,{}", script.display());
}

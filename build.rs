//! Link options for the release binary only (BENCHMARKS.md, "Release binary size"): the
//! linker is LLD, Rust's default on x86_64 Linux.
//! - `-z pack-relative-relocs` (DT_RELR) packs the ~49,000 load-time relocations of the
//!   position-independent executable into a bitmap: the binary keeps address-space
//!   randomisation and sheds a megabyte. It needs glibc 2.36 or later (Debian 12, the image's
//!   distroless base).
//! - `--icf=all` folds functions whose machine code is identical (generic code instantiated
//!   for types of the same layout).
//! - `-O2` lets LLD merge strings that are the tail of another string.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        println!("cargo:rustc-link-arg-bins=-Wl,--icf=all");
        println!("cargo:rustc-link-arg-bins=-Wl,-O2");
    }
}

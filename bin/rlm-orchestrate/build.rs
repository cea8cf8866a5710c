//! Links the release binary with zlib-compressed debug sections, identical code folded
//! and relative relocations packed, so it ships under 30 MiB while panic backtraces
//! still name file and line (std's symbolizer reads zlib sections;
//! `scripts/check_binary_size.sh` keeps it so, BENCHMARKS.md has the figures).
//! Only this binary's final link changes: no other unit's fingerprint does.

fn main() {
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if release && linux {
        println!("cargo::rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
        // Identical functions (monomorphised generics that compiled to the same code)
        // are kept once, and relative relocations are packed (glibc 2.36+ reads them):
        // together 0.8 MiB of the binary, nothing a run or a backtrace reads.
        println!("cargo::rustc-link-arg-bins=-Wl,--icf=all");
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo::rerun-if-changed=build.rs");
}

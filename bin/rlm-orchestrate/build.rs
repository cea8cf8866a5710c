//! Links the release binary with zlib-compressed debug sections, so it ships under
//! 30 MiB while panic backtraces still name file and line (std's symbolizer reads zlib
//! sections; `scripts/check_binary_size.sh` keeps it so, BENCHMARKS.md has the figures).
//! Only this binary's final link changes: no other unit's fingerprint does.

fn main() {
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    if release && linux {
        println!("cargo::rustc-link-arg-bins=-Wl,--compress-debug-sections=zlib");
    }
    println!("cargo::rerun-if-changed=build.rs");
}

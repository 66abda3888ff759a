// Declares `cfg(loom)` (set by RUSTFLAGS="--cfg loom" for the model checks in
// src/protocol.rs), so rustc's unexpected-cfgs lint knows it.
fn main() {
    println!("cargo::rustc-check-cfg=cfg(loom)");
}

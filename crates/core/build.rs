//! Compiles the few reduction kernels written in C (long double, long double complex and
//! _Float16 arithmetic, which Rust does not offer): see c/reduce_ext.c.

fn main() {
    println!("cargo:rerun-if-changed=c/reduce_ext.c");
    cc::Build::new()
        .file("c/reduce_ext.c")
        .flag("-std=c11")
        .opt_level(2)
        .compile("protean_reduce_ext");
}

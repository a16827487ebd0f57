//! Gives the shared library NEAT's soname and links the system libuv.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libneat.so.1");
    println!("cargo:rustc-link-lib=dylib=uv");
    println!("cargo:rerun-if-changed=build.rs");
}

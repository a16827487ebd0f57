//! Links Debian's libusrsctp (found with pkg-config when available, else -lusrsctp).
fn main() {
    println!("cargo:rustc-link-lib=usrsctp");
    println!("cargo:rerun-if-changed=build.rs");
}

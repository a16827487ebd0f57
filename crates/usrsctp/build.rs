//! Compiles, when usrsctp's internal headers of exactly the installed version are available,
//! the multihoming shim `c/multihome.c` and sets the cfg `usrsctp_multihome`. Nothing is
//! linked against libusrsctp: the crate loads Debian's `libusrsctp.so.2` when SCTP is first
//! used (`src/ffi/library.rs`), so a program that never uses SCTP does not pay for loading
//! it at start-up, and runs where it is not installed.
//!
//! Where the headers come from: `$TAPS_USRSCTP_SRC` (an unpacked usrsctp source tree), else
//! `${TAPS_CACHE_DIR:-/var/cache/taps}/usrsctp-src-<version>` as `scripts/deps.sh` leaves it,
//! where `<version>` is `dpkg-query`'s version of libusrsctp-dev. The tree's
//! `debian/changelog` must name that same version. `TAPS_NO_MULTIHOME=1` hides the headers
//! (builds the fallback). The GNU build id of the library file is compiled in as
//! `TAPS_MH_BUILD_ID`: at run time the shim is only called when the loaded library has it.
//! Without the shim the crate builds all the same and the multihoming calls return an error
//! that says why (`TAPS_MH_UNAVAILABLE`).
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=c/multihome.c");
    for v in ["TAPS_USRSCTP_SRC", "TAPS_CACHE_DIR", "TAPS_NO_MULTIHOME"] {
        println!("cargo:rerun-if-env-changed={v}");
    }
    println!("cargo:rustc-check-cfg=cfg(usrsctp_multihome)");
    let version = installed_version();
    println!(
        "cargo:rustc-env=TAPS_MH_VERSION={}",
        version.as_deref().unwrap_or("unknown")
    );
    match shim(version.as_deref()) {
        Ok(build_id) => {
            println!("cargo:rustc-cfg=usrsctp_multihome");
            println!("cargo:rustc-env=TAPS_MH_BUILD_ID={build_id}");
            println!("cargo:rustc-env=TAPS_MH_UNAVAILABLE=");
        }
        Err(why) => {
            println!("cargo:warning=usrsctp: SCTP multihoming disabled: {why}");
            println!("cargo:rustc-env=TAPS_MH_BUILD_ID=");
            println!("cargo:rustc-env=TAPS_MH_UNAVAILABLE={why}");
        }
    }
}

/// The Debian version of the installed libusrsctp-dev, if dpkg knows it.
fn installed_version() -> Option<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "libusrsctp-dev"])
        .output()
        .ok()?;
    let v = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Compiles the shim; returns the library's build id (hex) or why the shim is not built.
fn shim(version: Option<&str>) -> Result<String, String> {
    let version = version.ok_or("dpkg-query does not know libusrsctp-dev")?;
    let needs = format!(
        "SCTP multihoming needs usrsctp's source headers for version {version}; run scripts/deps.sh"
    );
    if std::env::var_os("TAPS_NO_MULTIHOME").is_some_and(|v| v != "0" && !v.is_empty()) {
        return Err(format!("{needs} (TAPS_NO_MULTIHOME is set)"));
    }
    let src = match std::env::var_os("TAPS_USRSCTP_SRC") {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = std::env::var_os("TAPS_CACHE_DIR")
                .map_or_else(|| PathBuf::from("/var/cache/taps"), PathBuf::from);
            cache.join(format!("usrsctp-src-{version}"))
        }
    };
    let changelog = src.join("debian/changelog");
    println!("cargo:rerun-if-changed={}", changelog.display());
    let lib_dir = src.join("usrsctplib");
    if !lib_dir.join("netinet/sctp_pcb.h").exists() {
        return Err(needs);
    }
    let first = std::fs::read_to_string(&changelog).unwrap_or_default();
    let tree_version = first
        .lines()
        .next()
        .and_then(|l| l.split('(').nth(1))
        .and_then(|l| l.split(')').next())
        .unwrap_or("");
    if tree_version != version {
        return Err(format!(
            "{needs} ({} holds version {tree_version:?})",
            src.display()
        ));
    }
    let lib = library_file().ok_or("libusrsctp.so.2 not found")?;
    println!("cargo:rerun-if-changed={}", lib.display());
    let build_id =
        elf_build_id(&lib).ok_or_else(|| format!("{} has no GNU build id", lib.display()))?;
    // The defines Debian's autotools build of libusrsctp uses (configure.ac defaults on
    // Linux): they decide the layout of the internal structures the shim reads.
    cc::Build::new()
        .file("c/multihome.c")
        .include(&lib_dir)
        .define("__Userspace__", None)
        .define("SCTP_PROCESS_LEVEL_LOCKS", None)
        .define("SCTP_SIMPLE_ALLOCATOR", None)
        .define("SCTP_DEBUG", None)
        .define("INET", None)
        .define("INET6", None)
        .define("_GNU_SOURCE", None)
        .define("HAVE_STDATOMIC_H", None)
        .define("HAVE_SYS_QUEUE_H", None)
        .define("HAVE_LINUX_IF_ADDR_H", None)
        .define("HAVE_LINUX_RTNETLINK_H", None)
        .define("HAVE_NETINET_IP_ICMP_H", None)
        .flag_if_supported("-std=c99")
        .flag_if_supported("-Wno-address-of-packed-member")
        .warnings(false)
        .try_compile("taps_usrsctp_multihome")
        .map_err(|e| format!("compiling c/multihome.c failed: {e}"))?;
    Ok(build_id)
}

/// The shared library the linker resolves `-lusrsctp` to at run time (`libusrsctp.so.2`).
fn library_file() -> Option<PathBuf> {
    let mut dirs = Vec::new();
    if let Ok(out) = Command::new("pkg-config")
        .args(["--variable=libdir", "usrsctp"])
        .output()
    {
        let d = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if out.status.success() && !d.is_empty() {
            dirs.push(PathBuf::from(d));
        }
    }
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    dirs.push(PathBuf::from(format!("/usr/lib/{arch}-linux-gnu")));
    dirs.push(PathBuf::from("/usr/lib"));
    dirs.into_iter()
        .map(|d| d.join("libusrsctp.so.2"))
        .find(|p| p.exists())
}

/// The GNU build id (hex) of a 64-bit little-endian ELF file, from its PT_NOTE segments.
fn elf_build_id(path: &Path) -> Option<String> {
    let f = std::fs::read(path).ok()?;
    let u16_at = |o: usize| Some(u16::from_le_bytes(f.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(f.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(f.get(o..o + 8)?.try_into().ok()?));
    if f.get(0..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let phoff = u64_at(0x20)? as usize;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(ph)? != 4 {
            continue; // not PT_NOTE
        }
        let (off, size) = (u64_at(ph + 8)? as usize, u64_at(ph + 32)? as usize);
        let mut p = off;
        while p + 12 <= off + size {
            let (namesz, descsz, ty) =
                (u32_at(p)? as usize, u32_at(p + 4)? as usize, u32_at(p + 8)?);
            let name = p + 12;
            let desc = name + namesz.div_ceil(4) * 4;
            if ty == 3 && f.get(name..name + namesz)? == b"GNU\0" {
                let id = f.get(desc..desc + descsz)?;
                return Some(id.iter().map(|b| format!("{b:02x}")).collect());
            }
            p = desc + descsz.div_ceil(4) * 4;
        }
    }
    None
}

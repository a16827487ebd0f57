#!/usr/bin/env bash
# Builds libneat (NEAT's C API on taps, crates/taps-capi) and installs it like a C library:
#
#   $libdir/libneat.so.1.M.P         the shared library (soname libneat.so.1)
#   $libdir/libneat.so.1             -> libneat.so.1.M.P   (what programs load at run time)
#   $libdir/libneat.so               -> libneat.so.1       (what `cc -lneat` links)
#   $libdir/libneat.a                the static library
#   $libdir/pkgconfig/neat.pc        for `cc prog.c $(pkg-config --cflags --libs neat)`
#   $prefix/include/neat.h
#
# usage: bash scripts/install-neat.sh [--prefix DIR] [--libdir DIR] [--debug] [--prebuilt DIR]
# (--help says more). Running it again installs the same files again (links and files are
# replaced). ldconfig runs only for root's install into a system directory (see the end).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CARGO=${CARGO:-cargo}

usage() {
    cat >&2 <<'EOF'
usage: bash scripts/install-neat.sh [--prefix DIR] [--libdir DIR] [--debug] [--prebuilt DIR]

  --prefix DIR     where to install (default /usr/local)
  --libdir DIR     the library directory (default PREFIX/lib; a relative one is under
                   PREFIX, e.g. lib/x86_64-linux-gnu)
  --debug          build and install the dev profile instead of the release one
  --prebuilt DIR   do not build: install the libneat.so and libneat.a found in DIR
  DESTDIR=/stage   (environment) stage the files under /stage; neat.pc still names PREFIX

Then: cc prog.c $(pkg-config --cflags --libs neat)
(with PKG_CONFIG_PATH=LIBDIR/pkgconfig when LIBDIR is not one pkg-config searches).
EOF
}
die() {
    echo "install-neat: $*" >&2
    exit 1
}

# ---- Options ----------------------------------------------------------------------------
prefix=/usr/local
libdir=
profile=release
prebuilt=
# Fails unless option $1 has a non-empty value $2.
need_arg() {
    if [ $# -lt 2 ] || [ -z "$2" ]; then
        echo "install-neat: $1 needs a directory" >&2
        usage
        exit 2
    fi
}
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) need_arg "$@"; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#*=}; shift ;;
        --libdir) need_arg "$@"; libdir=$2; shift 2 ;;
        --libdir=*) libdir=${1#*=}; shift ;;
        --prebuilt) need_arg "$@"; prebuilt=$2; shift 2 ;;
        --prebuilt=*) prebuilt=${1#*=}; shift ;;
        --debug) profile=debug; shift ;;
        -h | --help) usage 2>&1; exit 0 ;;
        *) echo "install-neat: unknown argument: $1" >&2; usage; exit 2 ;;
    esac
done
[ -n "$prefix" ] || die "--prefix must not be empty"

# neat.pc records absolute paths: make a relative prefix absolute, drop trailing slashes.
prefix=$(realpath -m -- "$prefix")
case $libdir in
    '') libdir=$prefix/lib ;;
    /*) libdir=$(realpath -m -- "$libdir") ;;
    *) libdir=$(realpath -m -- "$prefix/$libdir") ;;
esac
includedir=$prefix/include
DESTDIR=${DESTDIR:-}
if [ -n "$DESTDIR" ]; then
    DESTDIR=$(realpath -m -- "$DESTDIR")
fi

command -v "$CARGO" >/dev/null 2>&1 || die "cargo is not installed (https://rustup.rs)"
command -v readelf >/dev/null 2>&1 || die "readelf is missing (binutils; scripts/deps.sh installs it)"

# ---- The crate's version and target directory (cargo metadata reads, never builds) --------
meta=$(cd "$REPO" && "$CARGO" metadata --no-deps --format-version 1 --offline) ||
    die "cargo metadata failed in $REPO"
crate_version=$(sed -n 's/.*"name":"taps-capi","version":"\([^"]*\)".*/\1/p' <<<"$meta")
target_dir=$(sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p' <<<"$meta")
[ -n "$crate_version" ] || die "cannot find taps-capi's version in cargo metadata"
[ -n "$target_dir" ] || die "cannot find the target directory in cargo metadata"
[[ $crate_version =~ ^([0-9]+)\.([0-9]+)\.([0-9]+) ]] ||
    die "taps-capi's version '$crate_version' is not MAJOR.MINOR.PATCH"
crate_minor=${BASH_REMATCH[2]}
crate_patch=${BASH_REMATCH[3]}

# ---- Build (or take the prebuilt library) ---------------------------------------------------
if [ -n "$prebuilt" ]; then
    built=$(realpath -m -- "$prebuilt")
    [ -d "$built" ] || die "--prebuilt $prebuilt is not a directory"
else
    if [ "$profile" = release ]; then
        build=(build --release -p taps-capi)
    else
        build=(build -p taps-capi)
    fi
    echo "install-neat: cargo ${build[*]}"
    (cd "$REPO" && "$CARGO" "${build[@]}") || die "building libneat failed (cargo ${build[*]})"
    built=$target_dir/$profile
fi
for f in libneat.so libneat.a; do
    [ -f "$built/$f" ] || die "$built/$f is missing${prebuilt:+ (--prebuilt names the directory holding libneat.so and libneat.a)}"
done
header=$REPO/crates/taps-capi/include/neat.h
[ -f "$header" ] || die "$header is missing"

# ---- Names ----------------------------------------------------------------------------------
# The soname (libneat.so.1, set in crates/taps-capi/build.rs) is NEAT's: its major, 1, is
# the ABI of neat.h and stays while neat.h stays NEAT 1.x's. The crate's own version is
# 0.x, so the real file is named libneat.so.<soname major>.<crate minor>.<crate patch>
# (taps-capi 0.1.0 -> libneat.so.1.1.0): the soname stays 1, and each release of the crate
# gets a distinct, growing file name while the crate is 0.x. neat.pc's Version is the
# same 1.M.P.
soname=$(readelf -d "$built/libneat.so" | sed -n 's/.*Library soname: \[\(.*\)\].*/\1/p')
[[ $soname =~ ^libneat\.so\.([0-9]+)$ ]] ||
    die "$built/libneat.so has soname '${soname:-none}', not libneat.so.N (see crates/taps-capi/build.rs)"
abi_major=${BASH_REMATCH[1]}
version=$abi_major.$crate_minor.$crate_patch
real=libneat.so.$version

# ---- Install --------------------------------------------------------------------------------
dest_lib=$DESTDIR$libdir
dest_inc=$DESTDIR$includedir
mkdir -p "$dest_lib/pkgconfig" "$dest_inc" || die "cannot create directories under ${DESTDIR:-}$prefix"

# Copies $1 to $2 through a temporary file and a rename: a program running the old
# library keeps its copy, and nobody sees a half-written file.
put() {
    local tmp
    tmp=$(dirname "$2")/.$(basename "$2").tmp.$$
    install -m "$3" "$1" "$tmp" || die "cannot write $tmp"
    mv -f "$tmp" "$2" || die "cannot replace $2"
}
# A relative symlink $2 -> $1 in $dest_lib, replacing whatever $2 was.
link() {
    ln -sfn "$1" "$dest_lib/$2" || die "cannot make $dest_lib/$2"
}

put "$built/libneat.so" "$dest_lib/$real" 0755
link "$real" "$soname"
link "$soname" libneat.so
put "$built/libneat.a" "$dest_lib/libneat.a" 0644
put "$header" "$dest_inc/neat.h" 0644

# neat.pc. neat.h includes <uv.h>, so libuv (libuv1-dev's libuv.pc) is a public
# requirement: its flags come with ours. Libs.private is what the static library needs
# besides libuv: Rust's standard library's system libraries, as
# `cargo rustc -p taps-capi --lib -- --print native-static-libs` prints them (less -luv,
# which Requires gives, and -lc, which cc always links).
pc_libdir="\${prefix}/lib"
[ "$libdir" = "$prefix/lib" ] || pc_libdir=$libdir
pc=$(
    cat <<EOF
prefix=$prefix
libdir=$pc_libdir
includedir=\${prefix}/include

Name: neat
Description: NEAT's C API on taps (transport services), taps-capi $crate_version
Version: $version
Requires: libuv
Libs: -L\${libdir} -lneat
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl
Cflags: -I\${includedir}
EOF
)
tmp=$dest_lib/pkgconfig/.neat.pc.tmp.$$
printf '%s\n' "$pc" >"$tmp" || die "cannot write $tmp"
chmod 0644 "$tmp"
mv -f "$tmp" "$dest_lib/pkgconfig/neat.pc" || die "cannot write $dest_lib/pkgconfig/neat.pc"

from=$profile
[ -z "$prebuilt" ] || from="prebuilt, from $built"
echo "install-neat: installed libneat $version ($from) into ${DESTDIR:+$DESTDIR (staged) for }$prefix"
echo "  $libdir/$real, $soname, libneat.so, libneat.a"
echo "  $libdir/pkgconfig/neat.pc, $includedir/neat.h"

# ---- ldconfig -------------------------------------------------------------------------------
# Only for a real install (no DESTDIR) by root into a directory the dynamic linker searches
# (/usr/lib, /usr/local/lib and their multiarch directories): there it refreshes ld.so's
# cache. Anywhere else ldconfig has nothing to do, and a user or a staging run must not
# touch the system's cache.
system=false
case $libdir in
    /usr/lib | /usr/lib/* | /usr/local/lib | /usr/local/lib/* | /lib | /lib/*) system=true ;;
esac
if [ -z "$DESTDIR" ] && [ "$system" = true ] && [ "$(id -u)" = 0 ]; then
    if command -v ldconfig >/dev/null 2>&1; then
        ldconfig || echo "install-neat: warning: ldconfig failed" >&2
    elif [ -x /sbin/ldconfig ]; then
        /sbin/ldconfig || echo "install-neat: warning: ldconfig failed" >&2
    fi
elif [ -z "$DESTDIR" ] && [ "$system" = false ]; then
    echo "  programs: cc prog.c \$(PKG_CONFIG_PATH=$libdir/pkgconfig pkg-config --cflags --libs neat)"
    echo "  run them with LD_LIBRARY_PATH=$libdir (or link with -Wl,-rpath,$libdir)"
fi

# neat.pc requires libuv's: say so now rather than at the first `pkg-config neat`.
if command -v pkg-config >/dev/null 2>&1 && ! pkg-config --exists libuv; then
    echo "install-neat: warning: pkg-config cannot find libuv (install libuv1-dev): 'pkg-config neat' fails until it can" >&2
fi

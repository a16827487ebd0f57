#!/usr/bin/env bash
# Installs the system packages taps builds and tests against, when missing (Debian,
# root, apt): pkg-config, iproute2 (netlab), libusrsctp-dev (user-space SCTP), a C
# compiler, libuv1-dev and libjansson-dev (the NEAT C API and its C tests), python3
# (scripts/structure.py), and the independent TLS and QUIC peers the tests talk to:
# openssl (s_server) and ngtcp2's HTTP/3 server and client (gtlsserver, gtlsclient).
set -euo pipefail
need_apt=()
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v ss >/dev/null 2>&1 || need_apt+=(iproute2)
[ -e /usr/include/usrsctp.h ] || need_apt+=(libusrsctp-dev)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
[ -e /usr/include/uv.h ] || need_apt+=(libuv1-dev)
[ -e /usr/include/jansson.h ] || need_apt+=(libjansson-dev)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v gtlsserver >/dev/null 2>&1 || need_apt+=(ngtcp2-server)
command -v gtlsclient >/dev/null 2>&1 || need_apt+=(ngtcp2-client)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "installing: ${need_apt[*]}" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "please install: ${need_apt[*]} (as root: apt-get install ${need_apt[*]})" >&2
        exit 1
    fi
fi

# SCTP multihoming (crates/usrsctp/c/multihome.c) compiles against usrsctp's *internal*
# headers, which no Debian binary package ships: fetch the source package of exactly the
# installed libusrsctp-dev version from deb.debian.org (checksums from the .dsc), unpack it
# (with Debian's patches) into /var/cache/taps/usrsctp-src-<version>. Idempotent and quiet
# when already there; without it the crate still builds, without multihoming. Override the
# cache dir with TAPS_CACHE_DIR (crates/usrsctp/build.rs looks in the same place, or at
# TAPS_USRSCTP_SRC).
usrsctp_src() {
    local ver cache dir base url tmp f sum
    ver=$(dpkg-query -W -f='${Version}' libusrsctp-dev 2>/dev/null) || return 0
    cache=${TAPS_CACHE_DIR:-/var/cache/taps}
    dir="$cache/usrsctp-src-$ver"
    [ -e "$dir/usrsctplib/netinet/sctp_pcb.h" ] && return 0
    command -v dpkg-source >/dev/null 2>&1 && command -v curl >/dev/null 2>&1 || {
        echo "SCTP multihoming: need dpkg-dev and curl to fetch usrsctp $ver's source (skipped)" >&2
        return 0
    }
    mkdir -p "$cache" 2>/dev/null || {
        echo "SCTP multihoming: cannot create $cache (run as root or set TAPS_CACHE_DIR)" >&2
        return 0
    }
    base="http://deb.debian.org/debian/pool/main/libu/libusrsctp"
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    echo "fetching usrsctp $ver source (multihoming shim headers) into $dir" >&2
    curl -sSf -o "$tmp/p.dsc" "$base/libusrsctp_${ver}.dsc" || {
        echo "SCTP multihoming: cannot download libusrsctp_${ver}.dsc (skipped)" >&2
        return 0
    }
    # Every file the .dsc names, checked against its SHA-256 line.
    while read -r sum _ f; do
        curl -sSf -o "$tmp/$f" "$base/$f" &&
            echo "$sum  $tmp/$f" | sha256sum -c --quiet - || {
            echo "SCTP multihoming: $f missing or corrupt (skipped)" >&2
            return 0
        }
    done < <(sed -n '/^Checksums-Sha256:/,/^[^ ]/p' "$tmp/p.dsc" | grep '^ ')
    mv "$tmp/p.dsc" "$tmp/libusrsctp_${ver}.dsc"
    (cd "$tmp" && dpkg-source --no-check -q -x "libusrsctp_${ver}.dsc" src >/dev/null 2>&1) || {
        echo "SCTP multihoming: dpkg-source -x failed (skipped)" >&2
        return 0
    }
    echo "$ver" >"$tmp/src/.taps-version"
    rm -rf "$dir.tmp" && mv "$tmp/src" "$dir.tmp" && mv "$dir.tmp" "$dir"
}
usrsctp_src

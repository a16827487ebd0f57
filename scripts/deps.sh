#!/usr/bin/env bash
# Installs the system packages taps builds and tests against, when missing (Debian,
# root, apt): pkg-config, iproute2 (netlab), libusrsctp-dev (user-space SCTP), a C
# compiler, libuv1-dev and libjansson-dev (the NEAT C API and its C tests), python3
# (scripts/structure.py), and the independent TLS and QUIC peers the tests talk to:
# openssl (s_server), ngtcp2's HTTP/3 server and client (gtlsserver, gtlsclient) and
# caddy (HTTP/3 and HTTP/2 on one port, for taps::http::Client's race).
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
command -v caddy >/dev/null 2>&1 || need_apt+=(caddy)
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
# headers, which no Debian binary package ships: `apt-get source` fetches the source
# package of exactly the installed libusrsctp-dev version (apt checks it against the
# archive's signed index) and unpacks it, with Debian's patches, into
# /var/cache/taps/usrsctp-src-<version>. The deb-src entries are made from the machine's own
# deb entries in a private apt configuration (its own source list and package lists under a
# temporary directory), so the system's apt setup is left as it was. Idempotent and quiet
# when already there; without it the crate still builds, without multihoming (and the
# multihoming tests fail as root). Override the cache dir with TAPS_CACHE_DIR
# (crates/usrsctp/build.rs looks in the same place, or at TAPS_USRSCTP_SRC).
usrsctp_src() {
    local ver cache dir tmp f
    ver=$(dpkg-query -W -f='${Version}' libusrsctp-dev 2>/dev/null) || return 0
    cache=${TAPS_CACHE_DIR:-/var/cache/taps}
    dir="$cache/usrsctp-src-$ver"
    [ -e "$dir/usrsctplib/netinet/sctp_pcb.h" ] && return 0
    if ! command -v dpkg-source >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >/dev/null
        else
            echo "SCTP multihoming: need dpkg-dev to unpack usrsctp $ver's source (skipped)" >&2
            return 0
        fi
    fi
    mkdir -p "$cache" 2>/dev/null || {
        echo "SCTP multihoming: cannot create $cache (run as root or set TAPS_CACHE_DIR)" >&2
        return 0
    }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' RETURN
    echo "fetching usrsctp $ver source (multihoming shim headers) into $dir" >&2
    # deb-src twins of the deb entries, in both of apt's formats.
    mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/get"
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -e "$f" ] && sed -n '/^Types: deb$/,/^$/p' "$f" | sed 's/^Types: deb$/Types: deb-src/' \
            >"$tmp/parts/$(basename "$f")"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -e "$f" ] && sed -n 's/^deb /deb-src /p' "$f" >>"$tmp/parts/taps-src.list"
    done
    : >"$tmp/empty.list"
    local apt_opts=(-o "Dir::Etc::SourceList=$tmp/empty.list" -o "Dir::Etc::SourceParts=$tmp/parts"
        -o "Dir::State::Lists=$tmp/lists" -o "APT::Sandbox::User=root")
    apt-get "${apt_opts[@]}" update -qq >/dev/null 2>&1 || true
    (cd "$tmp/get" && apt-get "${apt_opts[@]}" source -qq --download-only "libusrsctp=$ver" >/dev/null 2>&1) || {
        echo "SCTP multihoming: apt-get source libusrsctp=$ver failed (skipped)" >&2
        return 0
    }
    (cd "$tmp/get" && dpkg-source -q -x "libusrsctp_${ver#*:}.dsc" "$tmp/src" >/dev/null 2>&1) || {
        echo "SCTP multihoming: dpkg-source -x failed (skipped)" >&2
        return 0
    }
    echo "$ver" >"$tmp/src/.taps-version"
    rm -rf "$dir.tmp" && mv "$tmp/src" "$dir.tmp" && mv "$dir.tmp" "$dir"
}
usrsctp_src

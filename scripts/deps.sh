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

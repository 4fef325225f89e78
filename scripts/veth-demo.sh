#!/bin/sh
# The gateway on real kernel interfaces: two veth pairs through net_af_packet.
#
#   client ns 10.99.0.1 [cgdemo-c] ==veth== [cgdemo-g0] gateway ns [cgdemo-g1] ==veth== [cgdemo-s] 10.99.0.2 server ns
#
# A web server in the server namespace, curl in the client namespace; the
# gateway forwards between its two af_packet ports and drops what
# cuckoogatectl blocks. Needs root, ip (iproute2), ethtool, curl and python3.
# Leaves nothing behind (namespaces, processes, files). Not part of
# `make test`: it needs root and changes network namespaces.
#
#   scripts/veth-demo.sh [BUILD_DIR]        (default: build)
#   CG_ACTION=reject scripts/veth-demo.sh   blocked clients get TCP resets at once
#                                           instead of waiting for their timeout
#
# Exit status 0 when every step behaved as expected. README.md, "Running on
# veth pairs (net_af_packet)", walks through the same commands.
set -eu

BUILD=${1:-build}
ACTION=${CG_ACTION:-drop}
case "$ACTION" in drop|reject) ;; *) echo "veth-demo: CG_ACTION must be drop or reject" >&2; exit 2 ;; esac
GW=$BUILD/app/cuckoogate
CTL=$BUILD/app/cuckoogatectl
NS_C=cgdemo-client NS_G=cgdemo-gw NS_S=cgdemo-server
ADDR_C=10.99.0.1 ADDR_S=10.99.0.2 PORT=8080

die() { echo "veth-demo: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
for t in ip ethtool curl python3; do
  command -v "$t" >/dev/null || die "needs $t (apt-get install -y iproute2 ethtool curl python3)"
done
[ -x "$GW" ] && [ -x "$CTL" ] || die "no $GW / $CTL: build first (scripts/build.sh $BUILD)"
for ns in $NS_C $NS_G $NS_S; do
  ! ip netns list | grep -qw "$ns" || die "namespace $ns exists: another demo running? (ip netns del $ns)"
done

TMP=$(mktemp -d /tmp/cgdemo.XXXXXX)
GW_PID= WEB_PID=
cleanup() {
  [ -n "$GW_PID" ] && kill -TERM "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
  [ -n "$WEB_PID" ] && kill "$WEB_PID" 2>/dev/null && wait "$WEB_PID" 2>/dev/null || true
  for ns in $NS_C $NS_G $NS_S; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

step() { printf '\n== %s\n' "$*"; }
in_ns() { ns=$1; shift; ip netns exec "$ns" "$@"; }
# HTTP status of a GET from the client ("000": no answer within 3 s).
get() { in_ns $NS_C curl -s -m 3 -o /dev/null -w '%{http_code}' "$@" || true; }
expect() {  # expect WHAT WANT GOT
  if [ "$2" = "$3" ]; then echo "  $1: $3 (as expected)"; else echo "  $1: $3, expected $2"; FAILED=1; fi
}
FAILED=0

step "namespaces and veth pairs"
for ns in $NS_C $NS_G $NS_S; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add cgdemo-c netns $NS_C type veth peer name cgdemo-g0 netns $NS_G
ip link add cgdemo-s netns $NS_S type veth peer name cgdemo-g1 netns $NS_G
ip -n $NS_C addr add $ADDR_C/24 dev cgdemo-c
ip -n $NS_S addr add $ADDR_S/24 dev cgdemo-s
for l in cgdemo-g0 cgdemo-g1; do ip -n $NS_G link set "$l" up; done
ip -n $NS_C link set cgdemo-c up
ip -n $NS_S link set cgdemo-s up
# The peers: no tx checksum offload. A veth hands its frames on with the
# checksum still to be filled in; through the gateway's packet sockets
# nobody fills it in, and the receiver drops every TCP segment.
in_ns $NS_C ethtool -K cgdemo-c tx off >/dev/null
in_ns $NS_S ethtool -K cgdemo-s tx off >/dev/null
# The gateway's ports: no GRO (off by default on veth, said here to be sure):
# merged segments exceed the MTU and are cut to the ring's frame size.
for l in cgdemo-g0 cgdemo-g1; do in_ns $NS_G ethtool -K "$l" gro off >/dev/null; done
echo "  $NS_C $ADDR_C <-> [cgdemo-g0 | $NS_G | cgdemo-g1] <-> $NS_S $ADDR_S"

step "web server in $NS_S"
mkdir "$TMP/www"
echo "hello through cuckoogate" > "$TMP/www/index.html"
head -c 2000000 /dev/urandom > "$TMP/www/big.bin"
# Started with `ip netns exec` itself (not a shell function), so that $! is
# the server's own pid: ip execs the command in the namespace.
ip netns exec $NS_S python3 -m http.server $PORT --bind $ADDR_S --directory "$TMP/www" \
  > "$TMP/web.log" 2>&1 &
WEB_PID=$!

step "cuckoogate run in $NS_G"
SOCK=$TMP/cg.sock
LAST_CPU=$(( $(nproc) - 1 ))
ip netns exec $NS_G "$GW" run --ctl "$SOCK" --action "$ACTION" -- --no-huge --no-pci --no-shconf -m 512 \
  "--lcores=(0-1)@(0-$LAST_CPU)" --log-level=lib.eal:error \
  --vdev=net_af_packet0,iface=cgdemo-g0 --vdev=net_af_packet1,iface=cgdemo-g1 \
  > "$TMP/gw.out" 2> "$TMP/gw.err" &
GW_PID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
[ -S "$SOCK" ] || { cat "$TMP/gw.err" >&2; die "the gateway did not come up"; }
head -1 "$TMP/gw.out"
for _ in $(seq 50); do [ "$(get http://$ADDR_S:$PORT/)" = 200 ] && break; sleep 0.1; done

step "through the gateway, nothing blocked"
expect "GET http://$ADDR_S:$PORT/" 200 "$(get http://$ADDR_S:$PORT/)"
expect "GET big.bin (2 MB)" 200 "$(get http://$ADDR_S:$PORT/big.bin)"
expect "GET http://demo.example:$PORT/" 200 "$(get --resolve demo.example:$PORT:$ADDR_S http://demo.example:$PORT/)"

step "cuckoogatectl add host demo.example"
"$CTL" -s "$SOCK" add host demo.example
T0=$(date +%s%N)
expect "GET http://demo.example:$PORT/" 000 "$(get --resolve demo.example:$PORT:$ADDR_S http://demo.example:$PORT/)"
MS=$(( ($(date +%s%N) - T0) / 1000000 ))
if [ "$ACTION" = reject ]; then
  # The gateway resets the connection: curl fails at once, not after its 3 s.
  if [ "$MS" -lt 1500 ]; then echo "  blocked GET failed after $MS ms (reset, as expected)"
  else echo "  blocked GET took $MS ms: expected a reset well under 1.5 s"; FAILED=1; fi
  in_ns $NS_C curl -sS -m 3 --resolve demo.example:$PORT:$ADDR_S http://demo.example:$PORT/ 2>&1 | sed 's/^/  curl: /' || true
else
  echo "  blocked GET gave up after $MS ms (silently dropped)"
fi
expect "GET http://$ADDR_S:$PORT/ (other host)" 200 "$(get http://$ADDR_S:$PORT/)"

step "cuckoogatectl add dst $ADDR_S"
"$CTL" -s "$SOCK" add dst $ADDR_S
expect "GET http://$ADDR_S:$PORT/" 000 "$(get http://$ADDR_S:$PORT/)"

step "cuckoogatectl del dst $ADDR_S"
"$CTL" -s "$SOCK" del dst $ADDR_S
expect "GET http://$ADDR_S:$PORT/" 200 "$(get http://$ADDR_S:$PORT/)"

step "the counters"
"$CTL" -s "$SOCK" hits
"$CTL" -s "$SOCK" stats | grep -E '^(rx|passed|dropped|malformed|oversized) '

step "what GRO on a gateway port does (shown, not required)"
in_ns $NS_G ethtool -K cgdemo-g1 gro on >/dev/null 2>&1 || true
echo "  GET big.bin with GRO on cgdemo-g1: $(get -w '%{http_code}, %{size_download} of 2000000 bytes' \
  http://$ADDR_S:$PORT/big.bin) (usually cut short: curl gives up after 3 s)"
in_ns $NS_G ethtool -K cgdemo-g1 gro off >/dev/null
sleep 1.2  # the gateway looks at its counters once a second
expect "GET big.bin with GRO off again" 200 "$(get http://$ADDR_S:$PORT/big.bin)"
grep -h "frames longer than" "$TMP/gw.err" | sed 's/^/  gateway log: /' || echo "  (no GRO merges happened on this kernel)"

step "stop"
kill -TERM "$GW_PID"
wait "$GW_PID" || FAILED=1
GW_PID=
grep -E '^  (packets in|passed|dropped|malformed|oversized) ' "$TMP/gw.out" || true
[ "$FAILED" = 0 ] && echo "veth-demo: every step as expected" || die "some steps failed (see above)"

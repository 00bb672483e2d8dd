#!/bin/sh
# Holds one proxy lease and keeps its address (host:port) in $OUT, replaced
# atomically when the lease moves to another proxy and removed while none
# is held; renews at a third of the TTL; releases on SIGTERM or SIGINT.
# Needs curl and jq. Runs as a sidecar: the application reads $OUT.
set -eu
OPERATOR=${OPERATOR:-http://egress-proxies-operator.egress-proxies-system:8080}
NAMESPACE=${NAMESPACE:?the namespace to lease in}
TTL=${TTL:-60}
TOKEN_FILE=${TOKEN_FILE:-/var/run/secrets/kubernetes.io/serviceaccount/token}
OUT=${OUT:-/tmp/egress-proxy}
path=

# call METHOD PATH: sets $code (000 when the operator cannot be reached)
# and $body.
call() {
  if answer=$(curl -sS -m 15 -X "$1" -w '\n%{http_code}' \
    -H "Authorization: Bearer $(cat "$TOKEN_FILE")" "$OPERATOR$2"); then
    code=$(printf '%s\n' "$answer" | tail -n 1)
    body=$(printf '%s\n' "$answer" | sed '$d')
  else
    code=000 body=
  fi
}

release() {
  if [ -n "$path" ]; then call DELETE "$path"; fi
  rm -f "$OUT"
  exit 0
}
trap release INT TERM

while :; do
  if [ -z "$path" ]; then
    call POST "/leases?namespace=$NAMESPACE&ttl=$TTL"
    if [ "$code" = 201 ]; then
      path=$(printf '%s' "$body" | jq -r .path)
      printf '%s' "$body" | jq -r .proxy.address >"$OUT.new"
      mv "$OUT.new" "$OUT"
      echo "leased $(cat "$OUT")" >&2
    else
      echo "no lease ($code): $body" >&2
    fi
  else
    call PUT "$path?ttl=$TTL"
    case $code in
    200) ;;
    410)
      echo "lease ended: $(printf '%s' "$body" | jq -r .reason)" >&2
      path=
      rm -f "$OUT"
      continue
      ;;
    *) echo "renewal failed ($code), retrying: $body" >&2 ;;
    esac
  fi
  sleep $((TTL / 3)) &
  wait $! || true
done

#!/usr/bin/env bash
# Makes sure nginx is on this machine (the shape API's CDN test runs a
# real nginx proxy cache in front of freshet serve), installing Debian's
# nginx package when it can. The package's own service is not started:
# the test starts its nginx on a free loopback port.
set -euo pipefail

have_nginx() {
  command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]
}

if have_nginx; then exit 0; fi

echo "nginx not found; installing Debian's nginx package." >&2
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  # Keep the package from starting its service on port 80.
  made_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq nginx >/dev/null || true
  [ -n "$made_policy" ] && rm -f /usr/sbin/policy-rc.d
  if command -v service >/dev/null 2>&1; then service nginx stop >/dev/null 2>&1 || true; fi
  have_nginx && exit 0
fi
echo "Could not install nginx. Run: sudo apt-get install -y nginx" >&2
exit 1

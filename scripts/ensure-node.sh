#!/usr/bin/env bash
# Makes sure Node.js and npm are on this machine: the shape API's Node
# tests (shape/nodetest, run by shape.TestElectricClient) drive the real
# @electric-sql/client, installed from shape/nodetest/package-lock.json
# with `npm ci`. Installs Debian's nodejs and npm packages when it can.
# The test runner's flags (--test-concurrency, --test-force-exit) need
# Node.js 20.14 or later: Debian 13's package has it, Debian 12's (18)
# does not.
set -euo pipefail

need_major=20
need_minor=14

have_node() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1
}

if ! have_node; then
  echo "Node.js or npm not found; installing Debian's nodejs and npm packages." >&2
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq nodejs npm >/dev/null || true
  fi
fi
if ! have_node; then
  echo "Could not install Node.js and npm. Run: sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
v=$(node --version) # v20.14.0
IFS=. read -r major minor _ <<<"${v#v}"
if [ "$major" -lt "$need_major" ] || { [ "$major" -eq "$need_major" ] && [ "$minor" -lt "$need_minor" ]; }; then
  echo "Node.js $v is too old for the shape API's Node tests: they need $need_major.$need_minor or later (Debian 13's nodejs package, or nodejs.org's builds)." >&2
  exit 1
fi

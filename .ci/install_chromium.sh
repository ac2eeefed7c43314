#!/usr/bin/env bash
# Install headless Chromium + chromedriver for the report's browser test
# (tests/test_report_browser.py). Idempotent and quiet: does nothing when
# /usr/bin/chromium and /usr/bin/chromedriver already exist. CI runs as root;
# elsewhere sudo is used when available.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "install_chromium.sh: need root (or sudo) to apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  echo "install_chromium.sh: chromium or chromedriver still missing after apt-get" >&2
  exit 1
fi

#!/bin/sh
# Placeholder until the guest image builder lands (issue 2).
mkdir -p "${1:-build/guest}"

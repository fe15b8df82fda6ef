#!/bin/sh
# The whole test suite: installs dependencies, builds iovm, the probe, the
# guest image and the User-Mode Linux kernel (cached after its first ~11 min
# build), checks the layering of src/ (tools/layers.py), runs the unit, KVM,
# real-driver and UML tests, the unit tests again
# under ASan+UBSan, and every fuzz harness briefly. Exits non-zero on any
# failure. KVM tests print SKIPPED (and count as skipped) without /dev/kvm.
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh

step() { printf '\n=== %s ===\n' "$*"; }

step "build (build/)"
[ -d build ] || meson setup build
ninja -C build

step "layering check (tools/layers.py)"
python3 tools/layers.py

step "guest image"
./tools/mkguest.sh build/guest

step "UML kernel (tools/mkuml.sh)"
./tools/mkuml.sh build/uml

step "unit, KVM, real-driver and UML tests"
meson test -C build --print-errorlogs --num-processes 2

step "unit tests under ASan+UBSan (build-asan/)"
[ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined \
	-Db_lundef=false -Dguest_tests=false -Duml_tests=false
ninja -C build-asan
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C build-asan --suite unit --print-errorlogs

step "fuzz harnesses (build-fuzz/, clang + libFuzzer)"
[ -d build-fuzz ] || CC=clang meson setup build-fuzz -Dfuzz=true \
	-Db_sanitize=address,undefined -Db_lundef=false -Dguest_tests=false \
	-Duml_tests=false
ninja -C build-fuzz
meson test -C build-fuzz --suite fuzz --print-errorlogs

step "all tests passed"

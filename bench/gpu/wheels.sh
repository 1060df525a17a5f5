#!/usr/bin/env bash
# Run HERE (a machine with pip's index), not on the GPU machine: downloads the Python 3.12 wheels
# the GPU image lacks (the game emulators and gymnasium; it has torch, numpy, opencv, matplotlib,
# tensorboard and pytest) into .whl/, which bench/gpu/check.sh installs there with no network.
# .whl/ is kept out of git through .git/info/exclude; name it in the device call's carry.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
py=.venv/bin/python
[ -x "$py" ] || py=python3
ver() { "$py" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
for pkg in ale-py gymnasium farama-notifications; do
  v=$(ver "$pkg"); spec="$pkg${v:+==$v}"
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "$spec"
done
ls -la .whl
du -sh .whl

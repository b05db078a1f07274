#!/usr/bin/env bash
# The Python package on a GPU machine, which has no Rust toolchain: installs a wheel built
# elsewhere into a folder on the machine's Python path (NumPy, SciPy, pytest and NetworkX from the
# machine's Python) and runs the package's GPU tests (python/tests/test_gpu.py) with the GPU
# required (GMCL_REQUIRE_GPU=1: a GPU that does not work fails them, it never skips them); with
# a gmcl binary carried too (.gpu/gmcl, or GMCL_BIN), the whole Python suite. Logs go to $OUT
# (or /tmp/gpu-check-python).
#
# Here (with the toolchain): build the wheel into .gpu/wheels (git-ignored), e.g.
#   MATURIN_PEP517_ARGS="--profile dev" CARGO_TARGET_DIR=$PWD/target \
#       pip wheel --no-deps -w .gpu/wheels ./python
# then carry [".gpu"] and run, from the project root on the GPU machine:
#   python/tests/gpu_check.sh [WHEEL]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpu-check-python}
mkdir -p "$out"
wheel=${1:-$(ls .gpu/wheels/gmcl-*.whl 2>/dev/null | head -1)}
if [ -z "$wheel" ] || [ ! -f "$wheel" ]; then
    echo "no wheel: pass its path, or build it into .gpu/wheels (see the top of $0)" >&2
    exit 2
fi
nvidia-smi -L | tee "$out/device.txt" || true
# The wheel goes into a folder of its own on the machine's Python path, not into a virtual
# environment: where python3 is itself an environment (a GPU image's PyTorch one),
# --system-site-packages would see its base interpreter's packages, not its NumPy and SciPy.
site=$(mktemp -d)/site
python3 -m pip install -q --disable-pip-version-check --no-index --no-deps --target "$site" "$wheel"
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
python3 -c 'import numpy, scipy, pytest; print("numpy", numpy.__version__, "scipy", scipy.__version__, "pytest", pytest.__version__)' | tee "$out/python.txt"
python3 -c 'import gmcl; print("gmcl", gmcl.__version__, "from", gmcl.__file__)' | tee "$out/package.txt"
export GMCL_REQUIRE_GPU=1 GMCL_ROOT=$PWD
tests=(python/tests/test_gpu.py)
bin=${GMCL_BIN:-$PWD/.gpu/gmcl}
if [ -x "$bin" ]; then
    export GMCL_BIN=$bin
    tests=(python/tests)
fi
python3 -m pytest -v -rs -p no:cacheprovider "${tests[@]}" 2>&1 | tee "$out/pytest.log"
exit "${PIPESTATUS[0]}"

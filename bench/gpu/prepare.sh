#!/usr/bin/env bash
# Here, with network to PyPI: put into .whl/ the wheels the GPU machine lacks, for run.sh there.
#
#   bash bench/gpu/prepare.sh
#
# The GPU machine (Python 3.12, no network) has torch, nvidia-ml-py, psutil, pandas, matplotlib,
# prometheus-client, pytest, pytest-timeout and pytest-xdist, but no msgspec (a dependency), no
# nvitop or gpustat (the peers the benches time), an unknown typer, and none of the test suite's
# junitparser. The versions below are the ones the test suite runs with here; typer is checked
# against pyproject.toml's range. .whl/ is ignored through .git/info/exclude (never .gitignore)
# and travels with `carry: [".whl"]`.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}

TYPER=typer==0.28.0 # carries its own click (typer._click): no click wheel needed
WHEELS=(
  "$TYPER" annotated-doc==0.0.7 shellingham==1.5.4
  rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
  nvitop==1.7.2
  gpustat==1.1.1 blessed==1.52.0 jinxed==2.1.0 wcwidth==0.9.4
  junitparser==5.0.3
  msgspec==0.22.0
)

# The pinned typer must satisfy pyproject.toml's requirement.
"$PY" - "$TYPER" <<'EOF'
import re, sys
from pathlib import Path
try:
    from packaging.specifiers import SpecifierSet
except ImportError:
    from pip._vendor.packaging.specifiers import SpecifierSet
spec = re.search(r'"typer([^"]*)"', Path("pyproject.toml").read_text()).group(1)
version = sys.argv[1].split("==")[1]
if version not in SpecifierSet(spec):
    sys.exit(f"prepare.sh: typer {version} is outside pyproject.toml's typer{spec}")
print(f"typer {version} satisfies typer{spec}")
EOF

mkdir -p .git/info
grep -qxF '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >>.git/info/exclude
rm -rf .whl
mkdir .whl
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64)
for wheel in "${WHEELS[@]}"; do
  if ! "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --implementation cp "${PLATFORMS[@]}" -d .whl "$wheel" 2>/dev/null; then
    # Published as a source archive only (pure Python): build the wheel here.
    "$PY" -m pip wheel -q --no-deps --no-binary=:all: -w .whl "$wheel"
  fi
done

if [ -n "$(git status --porcelain --ignored=no .whl 2>/dev/null)" ]; then
  echo "prepare.sh: .whl/ is not ignored by git" >&2
  exit 1
fi
ls .whl
echo "$(ls .whl/*.whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/ (ignored by git)"

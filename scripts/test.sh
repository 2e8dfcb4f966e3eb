#!/usr/bin/env bash
# Install everything the tests need and run them: the one test command README.md gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'

# The generated codec is committed; it must be exactly what the generator writes from the specs it vendors.
python3 scripts/gen_protocol.py --check

# Layer rules from DESIGN.md.
lint-imports

# pytest exits 5 when it collected no test: that is a failure here, as any other non-zero code.
set +e
python3 -m pytest -n 2 -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "scripts/test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"

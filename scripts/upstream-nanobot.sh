#!/usr/bin/env bash
# Run the plugin's tests against a nanobot source tree (e.g. a checkout of HKUDS/nanobot's
# main, or a pull request), to see which seams break before nanobot releases it.
#   ./scripts/upstream-nanobot.sh /path/to/nanobot-source [pytest args...]
# A temporary venv gets that nanobot (no deps) on top of this project's .venv packages
# (./scripts/bootstrap.sh first), and this checkout (editable); nothing in .venv changes.
# It prints one line per test file (passed/failed) and exits 1 when any test failed.
# Not part of CI: CI has no access to GitHub (docs/nanobot-plugin.md, "Next nanobot").
set -euo pipefail
src=${1:?usage: $0 NANOBOT_SOURCE_DIR [pytest args...]}; shift
[ -f "$src/pyproject.toml" ] && [ -d "$src/nanobot" ] || {
  echo "$src is not a nanobot source tree (no pyproject.toml and nanobot/); give a checkout of HKUDS/nanobot" >&2; exit 2; }
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
site=$(echo "$tmp"/venv/lib/python3*/site-packages)
.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > "$site/zz_project_venv.pth"
rm -rf "$site"/setuptools* "$site"/_distutils_hack "$site"/distutils-precedence.pth
NANOBOT_SKIP_WEBUI_BUILD=1 "$tmp/venv/bin/pip" install -q --no-deps "$src"
"$tmp/venv/bin/pip" install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING" || true
version=$("$tmp/venv/bin/python" -c "import importlib.metadata as m, nanobot, pathlib; print(m.version('nanobot-ai'), pathlib.Path(nanobot.__file__).parent)")
echo "nanobot under test: $version ($(git -C "$src" log -1 --format='%h %cd' --date=short 2>/dev/null || echo 'not a git checkout'))"
. scripts/env.sh
set +e
"$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider -rN --junitxml="$tmp/junit.xml" \
  "${@:-tests/nanobot}" >"$tmp/pytest.log" 2>&1
code=$?
set -e
"$tmp/venv/bin/python" - "$tmp/junit.xml" "$tmp/pytest.log" <<'EOF'
import collections, re, sys, xml.etree.ElementTree as ET
files = collections.defaultdict(lambda: [0, 0])
for case in ET.parse(sys.argv[1]).iter("testcase"):
    parts = case.get("classname", "").split(".")
    if parts[-1][:1].isupper():  # a test class: its module is the file
        parts = parts[:-1]
    bad = case.find("failure") is not None or case.find("error") is not None
    files["/".join(parts) + ".py"][bad] += 1
for name, (ok, bad) in sorted(files.items()):
    print(f"{'FAIL' if bad else 'ok  '} {name}: {ok} passed, {bad} failed")
seams = collections.Counter(m.group(1) for m in re.finditer(
    r"nanobot-memory-adapters: plugin disabled — (.+)", open(sys.argv[2]).read()))
for seam, n in seams.most_common():
    print(f"seam: {seam} ({n}x)")
EOF
exit $(( code == 0 ? 0 : 1 ))

"""The generated codec is exactly what scripts/gen_protocol.py writes, loads lazily, and stays out of `kfk --help`."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_protocol.py"
OUTPUT = ROOT / "kfk" / "protocol" / "messages"
SPECS = ROOT / "scripts" / "kafka-protocol" / "message"


def load_generator():
    """A fresh import of the script (it is not a package module); dataclasses need it in sys.modules while loading."""
    name = "kfk_gen_protocol_under_test"
    spec = importlib.util.spec_from_file_location(name, GENERATOR)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[name]
    return module


def test_generator_output_matches_the_committed_files() -> None:
    generator = load_generator()
    files = generator.render_all(SPECS)
    committed = {path.name for path in OUTPUT.glob("*.py")}
    assert set(files) == committed
    stale = sorted(name for name, text in files.items() if (OUTPUT / name).read_text(encoding="utf-8") != text)
    assert not stale, f"kfk/protocol/messages differs from scripts/gen_protocol.py output: {stale[:10]}"


def test_generator_is_deterministic() -> None:
    first = load_generator().render_all(SPECS)
    second = load_generator().render_all(SPECS)
    assert first == second


def run_python(code: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_headers_import_only_a_handful_of_api_modules() -> None:
    loaded = json.loads(
        run_python(
            """
            import json, sys
            from kfk.protocol.headers import RequestHeader, decode_request, encode_request
            from kfk.protocol.messages import request_class
            request = request_class(18)(client_software_name="kfk", client_software_version="0")
            header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1, client_id="c")
            decoded_header, body = decode_request(encode_request(header, request)[4:])
            assert body == request and decoded_header == header
            print(json.dumps(sorted(name for name in sys.modules if name.startswith("kfk.protocol.messages."))))
            """
        )
    )
    assert "kfk.protocol.messages.api_versions" in loaded
    assert set(loaded) <= {
        "kfk.protocol.messages.api_versions",
        "kfk.protocol.messages.request_header",
        "kfk.protocol.messages.response_header",
    }, loaded


def test_kfk_help_runs_without_loading_the_codec() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kfk", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout and "kfk" in result.stdout
    loaded = json.loads(
        run_python(
            """
            import json, sys
            sys.argv = ["kfk", "--help"]
            from kfk.cli import main
            try:
                main()
            except SystemExit:
                pass
            print(json.dumps(sorted(name for name in sys.modules if name.startswith("kfk.protocol.messages."))))
            """
        ).splitlines()[-1]
    )
    assert loaded == []

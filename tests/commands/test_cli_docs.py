"""completions/ and man/ are what scripts/gen_cli_docs.py generates from the app (this fails when they are stale:
run `python scripts/gen_cli_docs.py`), and the completion scripts complete."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_cli_docs"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generator():
    return load_generator()


def test_completions_and_man_pages_are_up_to_date(generator) -> None:
    stale = generator.stale_files(generator.render_all(generator.load_tree()))
    assert stale == [], f"regenerate with `python scripts/gen_cli_docs.py`: {stale}"


def test_every_command_group_has_a_man_page(generator) -> None:
    tree = generator.load_tree()
    pages = generator.man_pages(tree)
    assert set(pages) == {"kfk.1"} | {f"kfk-{name}.1" for name in tree.subcommands}
    topics = pages["kfk-topics.1"]
    assert topics.startswith('.TH KFK-TOPICS 1 ') and "\\fB\\-\\-replication\\-factor\\fR" in topics


def complete_with_bash(*words: str) -> list[str]:
    script = (f'source "{ROOT / "completions" / "kfk.bash"}"; COMP_WORDS=({" ".join(repr(w) for w in words)}); '
              'COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _kfk; printf "%s\\n" "${COMPREPLY[@]}"')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_subcommands_and_flags() -> None:
    assert complete_with_bash("kfk", "con") == ["configs", "connect", "connect-mirror-maker", "console-consume",
                                                "console-produce", "console-share-consume", "consumer-groups"]
    assert complete_with_bash("kfk", "topics", "de") == ["delete", "describe"]
    assert complete_with_bash("kfk", "topics", "create", "--rep") == ["--replication-factor"]
    assert complete_with_bash("kfk", "perf-test", "produce", "--num") == ["--num-records"]


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
def test_fish_completes_flags_of_the_right_command() -> None:
    script = f'source "{ROOT / "completions" / "kfk.fish"}"; complete -C "kfk consumer-groups --to-e"'
    output = subprocess.run(["fish", "-c", script], capture_output=True, text=True, check=True).stdout
    assert output.split("\t")[0] == "--to-earliest"

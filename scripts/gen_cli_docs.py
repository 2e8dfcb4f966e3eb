#!/usr/bin/env python
"""Write completions/ (bash, zsh, fish) and man/ (kfk.1 and one page per command) from the Typer app.

    python scripts/gen_cli_docs.py           # regenerate
    python scripts/gen_cli_docs.py --check   # exit 1 if the committed files are stale (tests run this check)

The completion scripts are static: they list every command path and its options, so pressing TAB never starts
Python (Typer's own --install-completion scripts call back into `kfk` on every TAB, about half a second each).
Options that take a file (--files, --command-config, --payload-file, ...) complete file names. Both outputs are
deterministic (sorted, no dates) so that the staleness check compares bytes.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMPLETIONS = ROOT / "completions"
MAN = ROOT / "man"

FILE_OPTIONS = ("--files", "--command-config", "--payload-file", "--producer.config", "--producer-config",
                "--consumer.config", "--consumer-config", "--log-dir")


@dataclass
class Option:
    flags: list[str]
    metavar: str | None
    help: str
    required: bool

    @property
    def takes_file(self) -> bool:
        return any(flag in FILE_OPTIONS for flag in self.flags)


@dataclass
class Command:
    path: tuple[str, ...]
    help: str
    options: list[Option] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    subcommands: dict[str, Command] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def summary(self) -> str:
        return self.help.strip().splitlines()[0] if self.help.strip() else ""

    def walk(self):
        yield self
        for sub in self.subcommands.values():
            yield from sub.walk()


def load_tree() -> Command:
    warnings.simplefilter("ignore", DeprecationWarning)
    sys.path.insert(0, str(ROOT))
    import typer.main

    from kfk.cli import app

    return _convert(typer.main.get_command(app), ("kfk",))


def _convert(click_command, path: tuple[str, ...]) -> Command:
    command = Command(path, click_command.help or "")
    for param in click_command.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            command.arguments.append((param.metavar or param.name).upper())
            continue
        flags = list(param.opts) + list(param.secondary_opts)
        metavar = None if param.is_flag else (param.metavar or param.name.upper())
        command.options.append(Option(flags, metavar, param.help or "", bool(param.required)))
    command.options.append(Option(["--help"], None, "Show the help and exit.", False))
    for name, sub in sorted(getattr(click_command, "commands", {}).items()):
        if not getattr(sub, "hidden", False):
            command.subcommands[name] = _convert(sub, path + (name,))
    return command


# --- man pages ---------------------------------------------------------------------------------------------------

def _roff(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("-", "\\-")
    return "\n".join(("\\&" + line if line.startswith((".", "'")) else line) for line in text.splitlines())


def _bold(text: str) -> str:
    return f"\\fB{_roff(text)}\\fR"


def _italic(text: str) -> str:
    return f"\\fI{_roff(text)}\\fR"


def _synopsis(command: Command) -> str:
    parts = [_bold(command.name)]
    if command.subcommands:
        parts.append(_italic("COMMAND"))
    parts.append(f"[{_italic('OPTIONS')}]")
    parts.extend(_italic(argument) for argument in command.arguments)
    return " ".join(parts)


def _options_section(command: Command) -> list[str]:
    lines: list[str] = []
    for option in command.options:
        flags = ", ".join(_bold(flag) for flag in option.flags)
        if option.metavar:
            flags += " " + _italic(option.metavar)
        lines += [".TP", flags, _roff(option.help + (" (required)" if option.required else ""))]
    return lines


def man_page(command: Command) -> str:
    title = "-".join(command.path).upper()
    lines = [f'.TH {title} 1 "" "kfk" "kfk manual"', ".SH NAME", f"{'-'.join(command.path)} \\- "
             f"{_roff(command.summary)}", ".SH SYNOPSIS", _synopsis(command), ".SH DESCRIPTION"]
    lines += [_roff(paragraph) if paragraph.strip() else ".PP" for paragraph in command.help.strip().splitlines()]
    if command.subcommands:
        lines.append(".SH COMMANDS")
        for name, sub in command.subcommands.items():
            lines += [".TP", _bold(name), _roff(sub.summary)]
    lines += [".SH OPTIONS"] + _options_section(command)
    for sub in command.subcommands.values():
        if sub.subcommands:
            continue  # a nested group has its own page
        lines += [f".SH {_roff(sub.name.upper())}", _synopsis(sub), ".PP", _roff(sub.summary)]
        lines += _options_section(sub)
    see_also = sorted("-".join(other.path) for other in TREE_PAGES if other is not command)
    lines += [".SH SEE ALSO", ", ".join(f"{_bold(name)}(1)" for name in see_also)]
    return "\n".join(lines) + "\n"


TREE_PAGES: list[Command] = []


def man_pages(tree: Command) -> dict[str, str]:
    """kfk.1, plus a page per top-level command (its subcommands and their options included)."""
    TREE_PAGES[:] = [tree] + list(tree.subcommands.values())
    return {f"{'-'.join(command.path)}.1": man_page(command) for command in TREE_PAGES}


# --- completions -------------------------------------------------------------------------------------------------

def bash_completion(tree: Command) -> str:
    cases = []
    for command in tree.walk():
        words = sorted(command.subcommands) + sorted(flag for option in command.options for flag in option.flags)
        files = sorted(flag for option in command.options if option.takes_file for flag in option.flags)
        cases.append(f'        "{command.name}") words="{" ".join(words)}"; files="{" ".join(files)}" ;;')
    groups = sorted({command.name for command in tree.walk() if command.subcommands})
    return f"""# bash completion for kfk; generated by scripts/gen_cli_docs.py from the Typer app. Do not edit.
# Enable: source this file, or copy it to /etc/bash_completion.d/kfk (or ~/.local/share/bash-completion/completions/kfk).
_kfk() {{
    local current="${{COMP_WORDS[COMP_CWORD]}}" previous="${{COMP_WORDS[COMP_CWORD-1]}}"
    local path="kfk" word index words files
    local groups=" {" ".join(f"[{group}]" for group in groups)} "
    for ((index = 1; index < COMP_CWORD; index++)); do
        word="${{COMP_WORDS[index]}}"
        if [[ "$groups" == *" [$path]"* && "$word" != -* ]]; then
            case "$path $word" in
{_bash_known_paths(tree)}
            esac
        fi
    done
    case "$path" in
{chr(10).join(cases)}
    esac
    if [[ " $files " == *" $previous "* ]]; then
        COMPREPLY=($(compgen -f -- "$current"))
        return
    fi
    if [[ "$previous" == --* && "$current" != -* && " $words " == *" $previous "* ]]; then
        return  # an option's value: nothing to suggest
    fi
    COMPREPLY=($(compgen -W "$words" -- "$current"))
}}
complete -o default -F _kfk kfk
"""


def _bash_known_paths(tree: Command) -> str:
    lines = []
    for command in tree.walk():
        if len(command.path) > 1:
            lines.append(f'                "{command.name}") path="{command.name}" ;;')
    return "\n".join(lines)


def zsh_completion(tree: Command) -> str:
    blocks = []
    for command in tree.walk():
        entries = [f"'{name}:{_zsh_escape(sub.summary)}'" for name, sub in command.subcommands.items()]
        specs = []
        for option in command.options:
            for flag in option.flags:
                action = ":file:_files" if option.takes_file else (
                    f":{_zsh_escape(option.metavar.lower())}:" if option.metavar else "")
                specs.append(f"'{flag}[{_zsh_escape(option.help)}]{action}'")
        blocks.append(f'        "{command.name}")\n'
                      f"            subcommands=({' '.join(entries)})\n"
                      f"            options=({' '.join(specs)})\n"
                      f"            ;;")
    return f"""#compdef kfk
# zsh completion for kfk; generated by scripts/gen_cli_docs.py from the Typer app. Do not edit.
# Enable: put this file in a directory of $fpath as _kfk, then run compinit. ($path is zsh's $PATH: not used here.)
_kfk() {{
    local command_path="kfk" word candidate
    local -a subcommands options
    for word in "${{words[@]:1:$((CURRENT-2))}}"; do
        [[ "$word" == -* ]] && continue
        candidate="$command_path $word"
        case "$candidate" in
{_zsh_known_paths(tree)}
        esac
    done
    case "$command_path" in
{chr(10).join(blocks)}
    esac
    if (( ${{#subcommands}} )) && [[ "$PREFIX" != -* ]]; then
        _describe -t commands "kfk command" subcommands
    else
        _arguments -s $options
    fi
}}
_kfk "$@"
"""


def _zsh_known_paths(tree: Command) -> str:
    return "\n".join(f'            "{command.name}") command_path="$candidate" ;;' for command in tree.walk()
                     if len(command.path) > 1)


def _zsh_escape(text: str) -> str:
    return text.replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def fish_completion(tree: Command) -> str:
    lines = ["# fish completion for kfk; generated by scripts/gen_cli_docs.py from the Typer app. Do not edit.",
             "# Enable: copy this file to ~/.config/fish/completions/kfk.fish",
             "function __kfk_path",
             "    set -l path kfk",
             "    for word in (commandline -opc)[2..-1]",
             "        switch \"$path $word\""]
    for command in tree.walk():
        if len(command.path) > 1:
            lines.append(f"            case '{command.name}'")
            lines.append(f"                set path {' '.join(command.path)}")
    lines += ["        end", "    end", "    echo $path", "end", "complete -c kfk -f"]
    for command in tree.walk():
        condition = f"test (__kfk_path) = '{command.name}'"
        for name, sub in command.subcommands.items():
            lines.append(f"complete -c kfk -n \"{condition}\" -a {name} -d '{_fish_escape(sub.summary)}'")
        for option in command.options:
            for flag in option.flags:
                kind = "-l " + flag[2:] if flag.startswith("--") else "-s " + flag[1:]
                value = (" -r -F" if option.takes_file else " -r") if option.metavar else ""
                lines.append(f"complete -c kfk -n \"{condition}\" {kind}{value} -d '{_fish_escape(option.help)}'")
    return "\n".join(lines) + "\n"


def _fish_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def render_all(tree: Command) -> dict[Path, str]:
    files = {COMPLETIONS / "kfk.bash": bash_completion(tree), COMPLETIONS / "_kfk": zsh_completion(tree),
             COMPLETIONS / "kfk.fish": fish_completion(tree)}
    files.update({MAN / name: text for name, text in man_pages(tree).items()})
    return files


def stale_files(rendered: dict[Path, str]) -> list[str]:
    """Files that differ from what the app generates, plus generated-looking files nobody generates any more."""
    stale = [str(path.relative_to(ROOT)) for path, text in rendered.items()
             if not path.exists() or path.read_text() != text]
    known = set(rendered)
    for directory, pattern in ((MAN, "kfk*.1"), (COMPLETIONS, "*")):
        stale += [str(path.relative_to(ROOT)) for path in sorted(directory.glob(pattern)) if path not in known
                  and path.is_file()]
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if completions/ or man/ are stale")
    arguments = parser.parse_args()
    rendered = render_all(load_tree())
    if arguments.check:
        stale = stale_files(rendered)
        if stale:
            print("stale (run python scripts/gen_cli_docs.py): " + ", ".join(stale), file=sys.stderr)
            return 1
        return 0
    for directory in (COMPLETIONS, MAN):
        directory.mkdir(exist_ok=True)
    for path in stale_files(rendered):
        if (ROOT / path) not in rendered:
            (ROOT / path).unlink()
    for path, text in rendered.items():
        path.write_text(text)
    print(f"wrote {len(rendered)} files to {COMPLETIONS.relative_to(ROOT)}/ and {MAN.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

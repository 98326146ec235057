"""The batch-script templates and line-level edits of them.

A template is a plain bash script that ``sbatch`` accepts as it is (``slurm/*.sbatch``; the
package reaches them through ``hpcrl/slurm/templates``, a link to that directory). Rendering
never fills placeholders: it rewrites the values of ``#SBATCH --key=value`` lines and whole
variable statements (``NAME=...``), so a rendered script reads like the template it came from.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from hpcrl.errors import ExplainedError

TEMPLATE_DIR = Path(__file__).resolve().with_name("templates")
TEMPLATE_NAMES = ("sync", "async", "central")
KIND_MARK = re.compile(r"^#\s*hpcrl-template:\s*(\S+)\s*$")
HETJOB = re.compile(r"^#SBATCH\s+(hetjob|packjob)\s*$")
# short sbatch options that mean a long one this module may rewrite
SHORT_OPTIONS = {"-N": "nodes", "-n": "ntasks", "-c": "cpus-per-task", "-t": "time",
                 "-p": "partition", "-A": "account", "-q": "qos", "-J": "job-name",
                 "-o": "output", "-G": "gpus"}


class TemplateError(ExplainedError, ValueError):
    """A template that cannot be found or rendered; the message names the fix."""


@dataclass
class Template:
    """A batch script template: its kind (sync, async, central), file and lines."""

    kind: str
    path: Path
    lines: list[str]


def template_path(name: str) -> Path:
    """The packaged template called ``name``."""
    return TEMPLATE_DIR / f"{name}.sbatch"


def load_template(spec: str) -> Template:
    """A packaged template by name (sync, async, central), or a template file by path (a
    site's edited copy); the file's ``# hpcrl-template: KIND`` line says how to size it."""
    path = template_path(spec) if spec in TEMPLATE_NAMES else Path(spec)
    if not path.is_file():
        if spec in TEMPLATE_NAMES:
            raise TemplateError(f"the packaged template '{path}' is missing; reinstall hpcrl "
                                f"(pip install -e . in a checkout)")
        raise TemplateError(f"no template '{spec}': name one of {', '.join(TEMPLATE_NAMES)} or "
                            f"give the path of a template file")
    lines = path.read_text().splitlines()
    kinds = [m.group(1) for m in map(KIND_MARK.match, lines) if m]
    if len(kinds) != 1 or kinds[0] not in TEMPLATE_NAMES:
        raise TemplateError(f"'{path}' has no '# hpcrl-template: sync|async|central' line; "
                            f"start from one of the templates in {TEMPLATE_DIR}")
    return Template(kinds[0], path, lines)


def _directive_end(lines: list[str]) -> int:
    """Index of the first line sbatch no longer reads #SBATCH directives from."""
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return i
    return len(lines)


def components(lines: list[str]) -> list[list[int]]:
    """Line indices of the #SBATCH option lines of each hetjob component."""
    parts: list[list[int]] = [[]]
    for i in range(_directive_end(lines)):
        if HETJOB.match(lines[i]):
            parts.append([])
        elif lines[i].startswith("#SBATCH"):
            parts[-1].append(i)
    return parts


def _tokens(line: str) -> list[str]:
    return shlex.split(line[len("#SBATCH"):])


def _key(token: str) -> str | None:
    if token.startswith("--"):
        return token[2:].split("=", 1)[0]
    return None


def _component(lines: list[str], component: int) -> list[int]:
    parts = components(lines)
    if component >= len(parts):
        raise TemplateError(f"the template has {len(parts)} job component(s), not "
                            f"{component + 1}; separate components with '#SBATCH hetjob'")
    return parts[component]


def get_option(lines: list[str], key: str, component: int = 0) -> str | None:
    """The value of ``#SBATCH --key=value`` in a component ('' for a bare flag), or None."""
    found = None
    for i in _component(lines, component):
        for token in _tokens(lines[i]):
            if _key(token) == key:
                found = token.split("=", 1)[1] if "=" in token else ""
    return found


def set_option(lines: list[str], key: str, value: str | None, component: int = 0
               ) -> list[str]:
    """The lines with ``--key=value`` (``--key`` when value is None) in a component: the
    existing option rewritten in place, or a new line after the component's last one."""
    out: list[str | None] = list(lines)
    indices = _component(lines, component)
    new = f"--{key}" if value is None else f"--{key}={value}"
    done = False
    for i in indices:
        tokens = _tokens(lines[i])
        for token in tokens:
            if not token.startswith("--") and SHORT_OPTIONS.get(token[:2]) == key:
                raise TemplateError(f"line '{lines[i]}' sets --{key} with the short option "
                                    f"{token[:2]}; write it as '#SBATCH --{key}=...' so that "
                                    f"hpcrl slurm render can change it")
        keys = [_key(t) for t in tokens]
        if key not in keys:
            continue
        kept = [t for t in tokens if _key(t) != key]
        if not done:  # the first occurrence takes the new value, later ones go
            kept.insert(keys.index(key), new)
            done = True
        out[i] = "#SBATCH " + " ".join(shlex.quote(t) for t in kept) if kept else None
    if not done:
        if not indices:
            raise TemplateError(f"job component {component} of the template has no #SBATCH "
                                f"line to add --{key} after")
        out.insert(indices[-1] + 1, f"#SBATCH {new}")
    return [line for line in out if line is not None]


def _statement(lines: list[str], name: str) -> tuple[int, int]:
    """[start, end) of the variable statement ``NAME=...`` (an array may span lines)."""
    starts = [i for i, line in enumerate(lines) if line.startswith(f"{name}=")]
    if len(starts) != 1:
        raise TemplateError(f"the template needs exactly one line starting with '{name}=' "
                            f"for hpcrl slurm render to write; it has {len(starts)}")
    start = end = starts[0]
    if lines[start].startswith(f"{name}=(") and not _closes(lines[start]):
        while end + 1 < len(lines) and not _closes(lines[end]):
            end += 1
    return start, end + 1


def _closes(line: str) -> bool:
    return line.split("#", 1)[0].rstrip().endswith(")")


def set_variable(lines: list[str], name: str, statement: str) -> list[str]:
    """The lines with the statement that assigns ``name`` replaced by ``statement``."""
    start, end = _statement(lines, name)
    return lines[:start] + [statement] + lines[end:]


def bash_array(name: str, items: list[str]) -> str:
    """``NAME=(item ...)``, each item quoted for bash."""
    return f"{name}=(" + " ".join(shlex.quote(item) for item in items) + ")"


def parse_minutes(value: str) -> int:
    """Slurm's --time (MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in whole minutes."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", value.strip())
    if not match:
        raise TemplateError(f"--time={value} is not a Slurm time (minutes, HH:MM:SS or "
                            f"D-HH:MM:SS)")
    days, a, b, c = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        return int(days) * 1440 + int(a) * 60 + int(b or 0) + (1 if c and int(c) else 0)
    if c is not None:     # HH:MM:SS
        return int(a) * 60 + int(b) + (1 if int(c) else 0)
    return int(a) + (1 if b and int(b) else 0)  # MM[:SS]

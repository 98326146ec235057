"""Print the share of hpcrl's public modules, classes and functions that have a docstring.

Public: a module whose file name does not start with ``_`` (``__init__`` counts as its
package), and at module or class level a class or function whose name does not start with
``_`` (methods of private classes and functions nested in functions are not counted).
``--list`` names the ones without; the exit status is 1 below ``--min`` percent.

    python tools/docstring_share.py [--list] [--min 100]
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "hpcrl"


def public_names(path: Path) -> list[tuple[str, bool]]:
    """``(qualified name, has a docstring)`` of the module at ``path`` and its public
    classes, functions and methods."""
    tree = ast.parse(path.read_text())
    module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
    out = [(module, ast.get_docstring(tree) is not None)]

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if node.name.startswith("_"):
                continue
            name = f"{prefix}.{node.name}"
            out.append((name, ast.get_docstring(node) is not None))
            if isinstance(node, ast.ClassDef):
                visit(node.body, name)

    visit(tree.body, module)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="name the undocumented ones")
    parser.add_argument("--min", type=float, default=0.0, help="fail below this percent")
    args = parser.parse_args(argv)
    names = [item for path in sorted(ROOT.rglob("*.py"))
             if not path.name.startswith("_") or path.name == "__init__.py"
             for item in public_names(path)]
    missing = [name for name, documented in names if not documented]
    share = 100.0 * (len(names) - len(missing)) / len(names)
    print(f"{len(names) - len(missing)} of {len(names)} public names documented: {share:.1f}%")
    if args.list:
        print("\n".join(missing))
    return 1 if share < args.min else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

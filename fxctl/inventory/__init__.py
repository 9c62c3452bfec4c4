"""The inventory: hosts and desired state, validated in full before anything runs."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from fxctl.errors import BadInput
from fxctl.inventory.model import Inventory, build_inventory
from fxctl.inventory.problems import problems_of
from fxctl.inventory.references import check_references
from fxctl.inventory.source import Document, Problem, SyntaxProblem, load_yaml_file, parse_yaml

__all__ = ["Inventory", "Problem", "InventoryInvalid", "load_inventory", "validate_document", "check_file",
           "summary"]


class InventoryInvalid(BadInput):
    """Every problem of an inventory at once (exit 2)."""

    def __init__(self, file: str, problems: list[Problem]):
        count = len(problems)
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{file}: {count} problem{'s' if count != 1 else ''}; nothing was run\n{lines}",
                         "fix the lines above; `fxctl inventory check` validates without running anything")
        self.problems = problems


def validate_document(doc: Document) -> list[Problem]:
    problems = [doc.problem(path, f"duplicate key (also on an earlier line); line {line} wins")
                for path, line in doc.duplicates]
    try:
        build_inventory(Path(doc.file), doc.data)
    except ValidationError as exc:
        problems += problems_of(exc, doc, Inventory)
    problems += check_references(doc)
    problems.sort(key=lambda p: (p.line or 0, p.key))
    return problems


def check_file(path: Path) -> tuple[Document | None, list[Problem]]:
    try:
        doc = load_yaml_file(path)
    except SyntaxProblem as exc:
        return None, [exc.problem]
    return doc, validate_document(doc)


def summary(path: Path) -> dict:
    """`fxctl inventory check`: valid or not, every problem, and what the file declares."""
    doc, problems = check_file(path)
    valid = not problems and doc is not None
    inventory = build_inventory(path, doc.data) if valid else None
    return {"file": str(path), "valid": valid, "problems": list(problems),
            "hosts": len(inventory.hosts) if inventory else 0, "arrays": len(inventory.arrays) if inventory else 0}


def load_inventory(path: Path) -> Inventory:
    doc, problems = check_file(path)
    if problems or doc is None:
        raise InventoryInvalid(str(path), problems)
    return build_inventory(path, doc.data)


def load_inventory_text(text: str, file: str = "<inventory>") -> Inventory:
    try:
        doc = parse_yaml(text, file)
    except SyntaxProblem as exc:
        raise InventoryInvalid(file, [exc.problem]) from None
    problems = validate_document(doc)
    if problems:
        raise InventoryInvalid(file, problems)
    return build_inventory(Path(file), doc.data)

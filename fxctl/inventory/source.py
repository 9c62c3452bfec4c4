"""YAML with positions: plain data plus the line of every key, so each problem can name its line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Path_ = tuple  # a key path: ("arrays", 0, "drives", 2, "serial")


@dataclass
class Problem:
    """One thing wrong with an input file: where it is and what is allowed."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


@dataclass
class Document:
    """A parsed YAML document with the line (1-based) of every key and list item."""

    file: str
    data: Any
    lines: dict[Path_, int] = field(default_factory=dict)
    duplicates: list[tuple[Path_, int]] = field(default_factory=list)

    def line_of(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest ancestor that exists."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), 1)

    def problem(self, path: Path_, message: str) -> Problem:
        return Problem(self.file, self.line_of(path), key_name(path), message)


def key_name(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_yaml(text: str, file: str) -> Document:
    """Parse YAML text; raise `SyntaxProblem` with the line on malformed YAML."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise SyntaxProblem(Problem(file, line, "", f"invalid YAML: {reason}")) from None
    doc = Document(file=file, data=None)
    if node is None:
        doc.data = {}
        return doc
    doc.lines[()] = node.start_mark.line + 1
    doc.data = _walk(node, (), doc)
    return doc


def load_yaml_file(path: Path) -> Document:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SyntaxProblem(Problem(str(path), None, "", "file not found")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SyntaxProblem(Problem(str(path), None, "", f"cannot read: {exc}")) from None
    return parse_yaml(text, str(path))


class SyntaxProblem(Exception):
    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


_constructor = yaml.SafeLoader("")


def _walk(node: yaml.Node, path: Path_, doc: Document) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _walk(key_node, path, doc)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                key = str(key)
            child = path + (key,)
            if key in out:
                doc.duplicates.append((child, key_node.start_mark.line + 1))
            doc.lines[child] = key_node.start_mark.line + 1
            out[key] = _walk(value_node, child, doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            doc.lines[path + (index,)] = item.start_mark.line + 1
            items.append(_walk(item, path + (index,), doc))
        return items
    return _constructor.construct_object(node, deep=True)

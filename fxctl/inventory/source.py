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
    except RecursionError:
        raise SyntaxProblem(Problem(file, None, "", "invalid YAML: nested too deeply")) from None
    doc = Document(file=file, data=None)
    if node is None:
        doc.data = {}
        return doc
    doc.lines[()] = node.start_mark.line + 1
    doc.data = _Walk(doc).value(node, ())
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
MAX_VALUES = 100_000  # keys, items and scalars after aliases are expanded; a real inventory has a few hundred


_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
MERGE_TAG = "tag:yaml.org,2002:merge"


class _Walk:
    """Composed YAML nodes as plain data, recording lines; aliases are followed, but a cycle or an
    expansion past MAX_VALUES (an alias bomb) is a problem at the line that uses it, found without
    building the expansion."""

    def __init__(self, doc: Document):
        self.doc = doc
        self.count = 0
        self.inside: set[int] = set()  # ids of the collections being walked: a cycle comes back to one

    def value(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_VALUES:
            raise self._refuse(path, f"the document expands to more than {MAX_VALUES} values "
                                     "(YAML aliases repeating a large value?)")
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            try:
                return _constructor.construct_object(node, deep=True)
            except yaml.YAMLError as exc:  # a tag the safe loader does not know (!!python/object ...)
                line = node.start_mark.line + 1
                raise SyntaxProblem(Problem(self.doc.file, line, key_name(path),
                                            f"invalid YAML: {getattr(exc, 'problem', None) or exc}")) from None
        if node.tag not in _PLAIN_TAGS:  # the safe loader would refuse it; walking by hand must too
            raise SyntaxProblem(Problem(self.doc.file, node.start_mark.line + 1, key_name(path),
                                        f"invalid YAML: could not determine a constructor for the tag '{node.tag}'"))
        if id(node) in self.inside:
            raise self._refuse(path, "a YAML alias refers to a value that contains it (a cycle)")
        self.inside.add(id(node))
        try:
            return self._mapping(node, path) if isinstance(node, yaml.MappingNode) else self._sequence(node, path)
        finally:
            self.inside.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_, out: dict | None = None) -> dict:
        """A mapping's keys; merge keys (`<<: *base`, `<<: [*a, *b]`) as PyYAML reads them: the mapping's
        own keys win over merged ones, an earlier merged mapping over a later one. A merged key keeps the
        line where it is written (in the anchored mapping). `out` given: merging into it (own keys first)."""
        merging = out is not None
        out = {} if out is None else out
        merged: list[yaml.MappingNode] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source in sources:
                    if not isinstance(source, yaml.MappingNode):
                        raise SyntaxProblem(Problem(self.doc.file, source.start_mark.line + 1, key_name(path),
                                                    "invalid YAML: a merge key (<<) takes a mapping or a list "
                                                    "of mappings"))
                    merged.append(source)
                continue
            key = self.value(key_node, path)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                key = str(key)
            child = path + (key,)
            if merging:
                if key in out:       # already set by the merging mapping or an earlier merged one
                    continue
                self.doc.lines.setdefault(child, key_node.start_mark.line + 1)
            else:
                if key in out:
                    self.doc.duplicates.append((child, key_node.start_mark.line + 1))
                self.doc.lines[child] = key_node.start_mark.line + 1
            out[key] = self.value(value_node, child)
        for source in merged:
            if id(source) in self.inside:
                raise self._refuse(path, "a YAML alias refers to a value that contains it (a cycle)")
            self.inside.add(id(source))
            try:
                self._mapping(source, path, out)
            finally:
                self.inside.discard(id(source))
        return out

    def _sequence(self, node: yaml.SequenceNode, path: Path_) -> list:
        items = []
        for index, item in enumerate(node.value):
            self.doc.lines.setdefault(path + (index,), item.start_mark.line + 1)
            items.append(self.value(item, path + (index,)))
        return items

    def _refuse(self, path: Path_, message: str) -> SyntaxProblem:
        return SyntaxProblem(Problem(self.doc.file, self.doc.line_of(path), key_name(path), message))
